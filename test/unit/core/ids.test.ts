// Time-ordered item ids: valid UUIDs (version 7), in creation order across milliseconds, unique.
import { describe, expect, test } from "bun:test";
import { newTimeUuid } from "../../../src/core/ids.ts";

describe("newTimeUuid", () => {
  test("a version 7 UUID whose first 48 bits are the time in milliseconds", () => {
    const before = Date.now();
    const id = newTimeUuid();
    const after = Date.now();
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const ms = parseInt(id.replace(/-/g, "").slice(0, 12), 16);
    expect(ms).toBeGreaterThanOrEqual(before);
    expect(ms).toBeLessThanOrEqual(after);
  });

  test("ids of later milliseconds sort after earlier ones; none repeats", async () => {
    const first = Array.from({ length: 1000 }, newTimeUuid);
    await Bun.sleep(3);
    const later = Array.from({ length: 1000 }, newTimeUuid);
    expect(later.every((b) => first.every((a) => a < b))).toBe(true);
    expect(new Set([...first, ...later]).size).toBe(2000);
  });
});
