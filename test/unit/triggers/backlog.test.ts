// src/triggers/backlog.ts: runs wait while their system's queue is full, start in the order they
// came as it has room, a refused start goes first again, the bound records the rest as not run,
// and stop records what still waits. The queue here is a counter standing for the code engine's.
import { describe, expect, test } from "bun:test";
import { TriggerBacklog, type TriggerJob } from "../../../src/triggers/backlog.ts";
import { createLogger } from "../../../src/core/log.ts";

const full = new Error("full");
const log = createLogger("silent");

/** A system queue of `size` places: a run takes one until `finish` frees it. */
function engine(size: number) {
  let used = 0;
  const started: number[] = [], dropped: [number, string][] = [];
  const finishers: (() => void)[] = [];
  const job = (n: number, refuseFirst = false): TriggerJob => ({
    trigger: `t${n}`,
    run: async () => {
      await Promise.resolve(); // as the engine's lookups: the room is taken a little later
      if (used >= size || refuseFirst) { refuseFirst = false; throw full; }
      used++;
      started.push(n);
      await new Promise<void>((r) => finishers.push(() => { used--; r(); }));
    },
    drop: async (why) => { dropped.push([n, why]); },
  });
  const finishAll = () => { for (const f of finishers.splice(0)) f(); };
  return { room: () => size - used, job, started, dropped, finishAll };
}
const settle = () => new Promise((r) => setTimeout(r, 30));

describe("TriggerBacklog", () => {
  test("runs past the queue's room wait and start in order as it frees", async () => {
    const e = engine(3);
    const b = new TriggerBacklog({ room: e.room, isQueueFull: (x) => x === full, log });
    for (let i = 0; i < 10; i++) b.add("sk", e.job(i));
    await settle();
    expect(e.started).toEqual([0, 1, 2]);
    expect(b.size).toBe(7);
    while (e.started.length < 10) { e.finishAll(); await settle(); }
    expect(e.started).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(b.size).toBe(0);
    expect(e.dropped).toEqual([]);
    e.finishAll();
  });

  test("a start refused after the look goes first again", async () => {
    const e = engine(1);
    const b = new TriggerBacklog({ room: e.room, isQueueFull: (x) => x === full, log });
    b.add("sk", e.job(0, true));
    b.add("sk", e.job(1));
    await settle();
    while (e.started.length < 2) { e.finishAll(); await settle(); }
    expect(e.started).toEqual([0, 1]);
    e.finishAll();
  });

  test("past the bound a run is recorded as not run; stop records the rest", async () => {
    const e = engine(1);
    const b = new TriggerBacklog({ room: e.room, isQueueFull: (x) => x === full, log }, 2);
    for (let i = 0; i < 5; i++) b.add("sk", e.job(i));
    await settle();
    expect(e.started).toEqual([0]);
    expect(e.dropped.map(([n]) => n)).toEqual([3, 4]);
    expect(e.dropped[0]![1]).toMatch(/^not run: 2 runs of this system's triggers were waiting/);
    await b.stop();
    expect(e.dropped.map(([n]) => n)).toEqual([3, 4, 1, 2]);
    expect(e.dropped[2]![1]).toBe("not run: the node stopped before it ran");
    b.add("sk", e.job(9));
    expect(e.dropped.at(-1)).toEqual([9, "not run: the node was stopping when its event came"]);
    e.finishAll();
  });

  test("systems wait apart: one full queue holds none of another's runs", async () => {
    const a = engine(1), other = engine(5);
    const b = new TriggerBacklog({ room: (sk) => (sk === "a" ? a.room() : other.room()), isQueueFull: (x) => x === full, log });
    for (let i = 0; i < 3; i++) b.add("a", a.job(i));
    for (let i = 0; i < 3; i++) b.add("b", other.job(i));
    await settle();
    expect(a.started).toEqual([0]);
    expect(other.started).toEqual([0, 1, 2]);
    a.finishAll(); other.finishAll();
    await b.stop();
  });
});
