// The shared buffer a blocked worker reads its call's answer from: answers matched to their call,
// late answers of calls given up on passed over, large answers through the port, the wait's bound.
import { afterAll, describe, expect, test } from "bun:test";
import { MessageChannel } from "node:worker_threads";
import { awaitAnswer, CALL_BUFFER_BYTES, newCallBuffer, writeAnswer } from "../../../src/code/callBuffer.ts";

const channel = new MessageChannel();
afterAll(() => { channel.port1.close(); channel.port2.close(); });
const soon = () => Date.now() + 1_000;

describe("call buffer", () => {
  test("an answer reaches the call it belongs to, as written (UTF-8 included)", () => {
    const buf = newCallBuffer();
    writeAnswer(buf, channel.port1, 1, '{"ok":true,"data":"héllo ✓ 日本"}');
    expect(awaitAnswer(buf, channel.port2, 1, soon())).toBe('{"ok":true,"data":"héllo ✓ 日本"}');
    writeAnswer(buf, channel.port1, 2, "");
    expect(awaitAnswer(buf, channel.port2, 2, soon())).toBe("");
  });

  test("the wait ends at its deadline with null; a late answer of an earlier call is not taken for this one", () => {
    const buf = newCallBuffer();
    const t0 = Date.now();
    expect(awaitAnswer(buf, channel.port2, 5, t0 + 30)).toBeNull();
    expect(Date.now() - t0).toBeGreaterThanOrEqual(29);
    writeAnswer(buf, channel.port1, 5, "late answer of call 5");
    expect(awaitAnswer(buf, channel.port2, 6, Date.now() + 30)).toBeNull();
    writeAnswer(buf, channel.port1, 6, "six");
    expect(awaitAnswer(buf, channel.port2, 6, soon())).toBe("six");
  });

  test("answers larger than the buffer come through the port, whole; a given-up call's large answer is passed over", () => {
    const buf = newCallBuffer();
    const big = (c: string) => c.repeat(CALL_BUFFER_BYTES + 1);
    writeAnswer(buf, channel.port1, 7, big("a")); // call 7 was given up on
    writeAnswer(buf, channel.port1, 8, big("b"));
    expect(awaitAnswer(buf, channel.port2, 8, soon())).toBe(big("b"));
    // a text of few characters but many bytes
    const wide = "✓".repeat(CALL_BUFFER_BYTES / 2);
    writeAnswer(buf, channel.port1, 9, wide);
    expect(awaitAnswer(buf, channel.port2, 9, soon())).toBe(wide);
  });

  test("a stop says why, cut to a bounded length", () => {
    const buf = newCallBuffer();
    writeAnswer(buf, channel.port1, 10, "the service was stopped", true);
    expect(awaitAnswer(buf, channel.port2, 10, soon())).toEqual({ stopped: "the service was stopped" });
    writeAnswer(buf, channel.port1, 11, "x".repeat(100_000), true);
    expect(awaitAnswer(buf, channel.port2, 11, soon())).toEqual({ stopped: "x".repeat(1000) });
  });
});
