// ClearBlade's relay suffixes: where a topic sends a message, which messages an edge sends up,
// and which topics an edge may send up at all.
import { describe, expect, test } from "bun:test";
import { goesUp, publishable, relayTarget } from "../../../src/sync/relay.ts";

describe("relay suffixes", () => {
  test("the four forms", () => {
    expect(relayTarget("plant/temp/_platform")).toEqual({ to: "platform" });
    expect(relayTarget("plant/temp/_edge/gw1")).toEqual({ to: "edge", edge: "gw1", platform: false });
    expect(relayTarget("plant/temp/_broadcast")).toEqual({ to: "broadcast" });
    expect(relayTarget("plant/temp/_edgeAndPlatform/gw1")).toEqual({ to: "edge", edge: "gw1", platform: true });
  });

  test("only the last levels count", () => {
    expect(relayTarget("plant/temp")).toBeNull();
    expect(relayTarget("_platform")).toBeNull();
    expect(relayTarget("_platform/x")).toBeNull();
    expect(relayTarget("a/_platform/x")).toBeNull();
    expect(relayTarget("a/_edge/gw1/x")).toBeNull();
    expect(relayTarget("a/_edge/")).toBeNull();
    expect(relayTarget("_edge/gw1")).toBeNull();
    expect(relayTarget("a/_edge/gw1/_platform")).toEqual({ to: "platform" });
    expect(relayTarget("a/_broadcast/_edge/gw2")).toEqual({ to: "edge", edge: "gw2", platform: false });
    expect(relayTarget("a/x_platform")).toBeNull();
    expect(relayTarget("a/_Platform")).toBeNull();
  });

  test("what an edge sends up", () => {
    expect(goesUp("t/_platform", "me", [])).toBe(true);
    expect(goesUp("t/_broadcast", "me", [])).toBe(true);
    expect(goesUp("t/_edge/other", "me", [])).toBe(true);
    expect(goesUp("t/_edgeAndPlatform/other", "me", [])).toBe(true);
    // for the platform even when it names this edge
    expect(goesUp("t/_edgeAndPlatform/me", "me", [])).toBe(true);
    // for this edge alone: it stays
    expect(goesUp("t/_edge/me", "me", [])).toBe(false);
    expect(goesUp("t/_edge/me", "me", ["t/#"])).toBe(false);
    // the template's topics (an Outpost extension); others stay
    expect(goesUp("telemetry/a", "me", ["telemetry/#"])).toBe(true);
    expect(goesUp("local/a", "me", ["telemetry/#"])).toBe(false);
  });

  test("topics an edge may send up", () => {
    expect(publishable("a/b/_platform")).toBe(true);
    expect(publishable("")).toBe(false);
    expect(publishable("a/#/_platform")).toBe(false);
    expect(publishable("a/+/_broadcast")).toBe(false);
    expect(publishable("$SYS/x/_platform")).toBe(false);
    expect(publishable("a\u0000b/_platform")).toBe(false);
  });
});
