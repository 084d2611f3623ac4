import { describe, expect, test } from "bun:test";
import { everyText } from "../../../../src/console/ui/schedule.ts";

describe("a timer's interval", () => {
  test("in the largest whole unit", () => {
    expect([1, 90, 300, 7200, 86400, 172800].map(everyText)).toEqual(["every 1 second", "every 90 seconds", "every 5 minutes", "every 2 hours", "every 1 day", "every 2 days"]);
  });
});
