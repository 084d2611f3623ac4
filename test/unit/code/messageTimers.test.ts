// Messaging timers on their own, with a clock the test moves: a timeout fires once, an interval
// its iterations, cancel stops both, the bounds (per system, shortest period, size, delay), a
// refused publish ends a timer, deleting a system and stopping cancel everything.
import { describe, expect, test } from "bun:test";
import type { Principal } from "../../../src/auth/principal.ts";
import { MessageTimers, type Scheduler } from "../../../src/code/messageTimers.ts";
import { ApiError } from "../../../src/core/errors.ts";

/** A scheduler whose time moves only when the test says. */
function clock() {
  let now = 0, seq = 0;
  const due = new Map<number, { at: number; fn: () => void }>();
  const s: Scheduler & { advance(ms: number): Promise<void>; pending(): number } = {
    set: (fn, ms) => { const id = ++seq; due.set(id, { at: now + ms, fn }); return id; },
    clear: (h) => { due.delete(h as number); },
    async advance(ms: number) {
      const end = now + ms;
      for (;;) {
        const next = [...due.entries()].filter(([, d]) => d.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
        if (!next) break;
        due.delete(next[0]);
        now = next[1].at;
        next[1].fn();
        await Promise.resolve();
      }
      now = end;
      await new Promise((r) => setTimeout(r, 0));
    },
    pending: () => due.size,
  };
  return s;
}

const owner: Principal = { kind: "user", systemKey: "sk", id: "u1", email: "u@x", roles: [], tokenHash: "h" };
const quiet = { warn() {}, info() {}, error() {}, debug() {} } as never;

function setup(publish?: (topic: string, payload: string) => Promise<unknown>) {
  const sent: [string, string, string][] = [];
  const c = clock();
  const timers = new MessageTimers(async (p, sk, topic, payload) => {
    expect(p).toBe(owner);
    sent.push([sk, topic, payload]);
    if (publish) await publish(topic, payload);
  }, quiet, { perSystem: 3, minIntervalMs: 100, maxDelayMs: 10_000, maxPayloadBytes: 16, maxIterations: 5 }, c);
  return { timers, sent, c };
}

const refusal = (f: () => unknown) => { try { f(); } catch (e) { return e instanceof ApiError ? e.detail : String(e); } return "(no error)"; };

describe("MessageTimers", () => {
  test("a timeout publishes once after its delay; an interval its iterations, a period apart", async () => {
    const { timers, sent, c } = setup();
    timers.add(owner, "sk", "timeout", { delayMs: 500, topic: "t/once", payload: "hello" });
    timers.add(owner, "sk", "interval", { delayMs: 200, topic: "t/rep", payload: { n: 1 }, iterations: 3 });
    expect(timers.count("sk")).toBe(2);
    await c.advance(199);
    expect(sent).toEqual([]);
    await c.advance(1);
    expect(sent).toEqual([["sk", "t/rep", '{"n":1}']]);
    await c.advance(300);
    expect(sent.map((s) => s[1])).toEqual(["t/rep", "t/rep", "t/once"]);
    await c.advance(10_000);
    expect(sent.map((s) => s[1])).toEqual(["t/rep", "t/rep", "t/once", "t/rep"]);
    expect(timers.count("sk")).toBe(0);
    expect(c.pending()).toBe(0);
  });

  test("cancel stops a timer before it fires; a fired, unknown or other kind's id is refused", async () => {
    const { timers, sent, c } = setup();
    const a = timers.add(owner, "sk", "timeout", { delayMs: 100, topic: "t", payload: "x" });
    const b = timers.add(owner, "sk", "interval", { delayMs: 100, topic: "t", payload: "y", iterations: 5 });
    expect(a).toMatch(/^[0-9a-f]{30}$/);
    expect(refusal(() => timers.cancel("sk", "interval", a))).toMatch(/cancelCBTimeout/);
    expect(refusal(() => timers.cancel("other", "timeout", a))).toMatch(/no timeout/);
    expect(timers.cancel("sk", "timeout", a)).toBe(a);
    await c.advance(250);
    expect(sent.map((s) => s[2])).toEqual(["y", "y"]);
    expect(timers.cancel("sk", "interval", b)).toBe(b);
    await c.advance(1000);
    expect(sent.length).toBe(2);
    expect(refusal(() => timers.cancel("sk", "timeout", a))).toMatch(/no timeout/);
    expect(refusal(() => timers.cancel("sk", "timeout", 42))).toMatch(/id is required/);
  });

  test("bounds: per system, longest delay, size, iterations, topic", () => {
    const { timers } = setup();
    const bad: [Record<string, unknown>, "timeout" | "interval", RegExp][] = [
      [{ delayMs: -1, topic: "t", payload: "" }, "timeout", /from 0/],
      [{ delayMs: 10_001, topic: "t", payload: "" }, "timeout", /to 10000/],
      [{ delayMs: "100", topic: "t", payload: "" }, "timeout", /number of milliseconds/],
      [{ delayMs: Number.NaN, topic: "t", payload: "" }, "timeout", /number of milliseconds/],
      [{ delayMs: 100, topic: "t/#", payload: "" }, "timeout", /without wildcards/],
      [{ delayMs: 100, topic: "", payload: "" }, "timeout", /topic/],
      [{ delayMs: 100, topic: "x".repeat(1025), payload: "" }, "timeout", /topic/],
      [{ delayMs: 100, topic: "t", payload: "x".repeat(17) }, "timeout", /larger than 16 bytes/],
      [{ delayMs: 100, topic: "t", payload: "", iterations: 0 }, "interval", /iterations/],
      [{ delayMs: -1, topic: "t", payload: "", iterations: 1 }, "interval", /from 0/],
      [{ delayMs: 100, topic: "t", payload: "", iterations: 6 }, "interval", /iterations/],
      [{ delayMs: 100, topic: "t", payload: "", iterations: 1.5 }, "interval", /iterations/],
    ];
    for (const [r, kind, re] of bad) expect(refusal(() => timers.add(owner, "sk", kind, r as never))).toMatch(re);
    expect(timers.count("sk")).toBe(0);
    for (let i = 0; i < 3; i++) timers.add(owner, "sk", "timeout", { delayMs: 1000, topic: "t", payload: "" });
    expect(refusal(() => timers.add(owner, "sk", "timeout", { delayMs: 1000, topic: "t", payload: "" }))).toMatch(/already has 3/);
    // the bound is per system
    timers.add(owner, "other", "timeout", { delayMs: 1000, topic: "t", payload: "" });
    expect(timers.count("other")).toBe(1);
  });

  test("an interval shorter than the shortest period repeats at it; -1 iterations repeat until cancelled", async () => {
    const { timers, sent, c } = setup();
    const id = timers.add(owner, "sk", "interval", { delayMs: 30, topic: "t/fast", payload: "f", iterations: -1 });
    await c.advance(99);
    expect(sent).toEqual([]);
    await c.advance(1);
    expect(sent.length).toBe(1);
    // far past any count (maxIterations is 5 here)
    await c.advance(2_000);
    expect(sent.length).toBe(21);
    expect(timers.count("sk")).toBe(1);
    expect(timers.cancel("sk", "interval", id)).toBe(id);
    await c.advance(1_000);
    expect(sent.length).toBe(21);
    expect(c.pending()).toBe(0);
  });

  test("a refused publish ends the timer; forgetSystem and stop cancel everything", async () => {
    let refuse = false;
    const { timers, sent, c } = setup(async () => { if (refuse) throw new ApiError("PERMISSION_DENIED", "no"); });
    timers.add(owner, "sk", "interval", { delayMs: 100, topic: "t", payload: "a", iterations: 5 });
    await c.advance(100);
    refuse = true;
    await c.advance(100);
    expect(sent.length).toBe(2);
    expect(timers.count("sk")).toBe(0);
    await c.advance(1000);
    expect(sent.length).toBe(2);

    timers.add(owner, "sk", "interval", { delayMs: 100, topic: "t", payload: "b", iterations: 5 });
    timers.add(owner, "gone", "timeout", { delayMs: 100, topic: "t", payload: "c" });
    timers.forgetSystem("gone");
    expect(timers.count("gone")).toBe(0);
    timers.stop();
    expect(timers.count("sk")).toBe(0);
    expect(c.pending()).toBe(0);
    expect(refusal(() => timers.add(owner, "sk", "timeout", { delayMs: 1, topic: "t", payload: "" }))).toMatch(/stopping/);
  });
});
