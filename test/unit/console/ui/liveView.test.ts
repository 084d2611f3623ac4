import { describe, expect, test } from "bun:test";
import { type Message, mergeLive } from "../../../../src/console/ui/liveView.ts";

const m = (time: number, payload: string): Message => ({ topicid: "t", time, payload, userid: "u", qos: 0 });

describe("the topic's live view", () => {
  test("a poll from second `since` replaces what was held of that second: nothing repeated, nothing lost", () => {
    const held = [m(11, "c"), m(10, "b"), m(9, "a")];
    // the answer from second 11 on: c again, and d of the same second, and e after
    expect(mergeLive(held, [m(12, "e"), m(11, "d"), m(11, "c")], 11).map((x) => x.payload)).toEqual(["e", "d", "c", "b", "a"]);
  });

  test("bounded: the newest `max` only", () => {
    const held = Array.from({ length: 5 }, (_, i) => m(i, String(i))).reverse();
    expect(mergeLive(held, [m(9, "new")], 5, 3).map((x) => x.payload)).toEqual(["new", "4", "3"]);
  });

  test("the first poll takes the answer as it is", () => {
    expect(mergeLive([m(1, "old")], [m(2, "x")], null)).toEqual([m(2, "x")]);
  });
});
