// The timer scheduler's pace: a run a tick fires late (the tick before it was still busy, or the
// node was paused) does not make the next run come sooner than the timer's frequency. Ticks are
// driven by hand at chosen times on a timer whose slots lie a day ahead, so the node's own
// scheduler never finds it due. In-process, on a real database and the real code engine.
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { type App, start } from "../../../src/app.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import { loadConfig } from "../../../src/config.ts";
import { TimerScheduler } from "../../../src/triggers/scheduler.ts";

let app: App;
let dev: Principal;
let sk = "";

beforeAll(async () => {
  app = await start(loadConfig(["--db", ":memory:", "--http-port", "0", "--mqtt-port", "0", "--mqtt-ws-port", "0", "--log-level", "silent"]));
  const s = app.services;
  dev = (await s.tokens.resolve((await s.developers.register({ email: "timers@example.com", password: "pw" })).dev_token))!;
  sk = (await s.systems.create(dev, { name: "timers" })).system_key;
  await s.services.create(dev, sk, "tick", { code: "function tick(req, resp) { resp.success(req.params.runs); }" });
});
afterAll(() => app.stop());
// each test's timer goes with it, whatever the test found
afterEach(async () => { for (const t of await app.services.triggers.listTimers(dev, sk)) await app.services.triggers.deleteTimer(dev, sk, t.name); });

/** A scheduler of its own over the node's parts, and a timer every `frequency` s from `startAt`. */
async function timer(name: string, frequency: number, startAt: number) {
  const s = app.services;
  await s.triggers.createTimer(dev, sk, name, { frequency, repeats: -1, start_time: new Date(startAt).toISOString(), service_name: "tick" });
  const scheduler = new TimerScheduler(s.triggers, s.systems, s.code, app.log);
  const nextRun = async () => (await s.triggers.dueTimers(startAt + 365 * 86_400_000)).find((t) => t.name === name)?.next_run;
  return { scheduler, nextRun };
}

test("a run fired late counts the next one from the firing: never two runs closer than the frequency", async () => {
  const slot = Math.ceil((Date.now() + 86_400_000) / 1000) * 1000 + 50; // 50 ms past a second, a day ahead
  const { scheduler, nextRun } = await timer("late", 2, slot);
  // the tick meant for this slot did not come (its predecessor was busy): the next one fires it
  await scheduler.tick(slot + 950);
  expect(scheduler.fired).toBe(1);
  // the slot after it would be 1.05 s after this run: the tick then must not fire it
  await scheduler.tick(slot + 2000);
  expect(scheduler.fired).toBe(1);
  expect(await nextRun()).toBe(slot + 950 + 2000);
  await scheduler.tick(slot + 2950);
  expect(scheduler.fired).toBe(2);
});

test("runs on time keep their slots (a tick's jitter does not add up)", async () => {
  const slot = Math.ceil((Date.now() + 2 * 86_400_000) / 1000) * 1000 + 50;
  const { scheduler, nextRun } = await timer("steady", 2, slot);
  await scheduler.tick(slot - 50); // a tick a little early for the slot: within its slack
  expect(scheduler.fired).toBe(1);
  expect(await nextRun()).toBe(slot + 2000);
  await scheduler.tick(slot + 2000 + 80); // a little late
  expect(scheduler.fired).toBe(2);
  expect(await nextRun()).toBe(slot + 4000);
});
