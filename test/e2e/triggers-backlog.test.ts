// Trigger runs past a system's code queue (--code-queue), black-box: a burst of MQTT publishes on a
// trigger's topic runs the trigger's service once per publish, however small the queue (the runs
// wait in the trigger backlog); past the backlog's bound (--code-trigger-backlog) a run is
// recorded as a failed run, which /codeadmin/failed lists and retries, so every publish is either
// run or recorded, never dropped.
import mqtt from "mqtt";
import t from "tap";
import { Client, collectionWith, type DevSystem, devWithSystem, type Outpost, qs, startOutpost, uniq, waitFor } from "./harness.ts";

async function service(sys: DevSystem, name: string, code: string) {
  const r = await sys.dev.post(`/admin/code/v/1/${sys.systemKey}/${name}`, { code, parameters: [] });
  if (r.status !== 200) throw new Error(`create service ${name}: ${r.status} ${r.text}`);
}

/** A collection, a service writing one row per run (after `busyMs` of work) and a Messaging
 *  Publish trigger on `topic` running it. */
async function recordingTrigger(sys: DevSystem, topic: string, busyMs = 0) {
  const col = await collectionWith(sys, [["topic", "string"], ["n", "int"]], uniq("runs"));
  const name = uniq("rec");
  await service(sys, name, `function ${name}(req, resp) {
    var until = Date.now() + ${busyMs}; while (Date.now() < until) {}
    ClearBlade.Collection({ collectionName: "${col.name}" }).create({ topic: req.params.topic, n: Number(req.params.body) }, function (err, d) {
      if (err) resp.error(d); else resp.success("recorded");
    });
  }`);
  const r = await sys.dev.post(`/admin/triggers/handlers/${sys.systemKey}/${uniq("trg")}`, { def_module: "Messaging", def_name: "Publish", key_value_pairs: { topic }, service_name: name });
  if (r.status !== 200) throw new Error(`create trigger: ${r.status} ${r.text}`);
  return { col, name };
}

async function rows(sys: DevSystem, colId: string): Promise<number[]> {
  const r = await sys.dev.get(`/api/v/1/data/${colId}?query=${qs({ PAGESIZE: 0, PAGENUM: 0 })}`);
  if (r.status !== 200) throw new Error(`read rows: ${r.status} ${r.text}`);
  return r.body.DATA.map((x: { n: number }) => x.n);
}

/** Publishes `count` messages (QoS 1, acknowledged) on `topic/<i>` with the body i. */
async function publishBurst(o: Outpost, sys: DevSystem, topic: string, count: number) {
  const c = await new Promise<mqtt.MqttClient>((res, rej) => {
    const m = mqtt.connect(`mqtt://127.0.0.1:${o.mqttPort}`, { username: sys.devToken, password: sys.systemKey, clientId: uniq("pub"), reconnectPeriod: 0, connectTimeout: 5000, protocolVersion: 4 });
    m.once("connect", () => res(m));
    m.once("error", (e) => { m.end(true); rej(e); });
  });
  try {
    await Promise.all(Array.from({ length: count }, (_, i) => new Promise<void>((res, rej) => c.publish(`${topic}/${i}`, String(i), { qos: 1 }, (e) => (e ? rej(e) : res())))));
  } finally { c.end(true); }
}

const failedRuns = async (sys: DevSystem) => {
  const r = await sys.dev.get(`/codeadmin/failed/${sys.systemKey}`);
  if (r.status !== 200) throw new Error(`failed runs: ${r.status} ${r.text}`);
  return r.body[sys.systemKey] as { id: string; service_name: string; params: { body: string }; error: string; trigger: string }[];
};

t.test("a burst of 400 publishes runs its trigger 400 times with a code queue of 2", async (t) => {
  const o = await startOutpost({ args: ["--code-queue", "2"] });
  t.teardown(() => o.stop());
  const s = await devWithSystem(o, "backlog-burst");
  const { col } = await recordingTrigger(s, "burst/+");
  await publishBurst(o, s, "burst", 400);
  t.ok(await waitFor(async () => (await rows(s, col.id)).length >= 400, 60_000), "every publish ran the trigger's service");
  const got = (await rows(s, col.id)).sort((a, b) => a - b);
  t.same(got, Array.from({ length: 400 }, (_, i) => i), "once each");
  t.same(await failedRuns(s), [], "no run failed or was left out");
});

t.test("past --code-trigger-backlog a run is recorded as a failed run, and its retry runs it", async (t) => {
  const o = await startOutpost({ args: ["--code-queue", "1", "--code-trigger-backlog", "5", "--code-workers", "1"] });
  t.teardown(() => o.stop());
  const s = await devWithSystem(o, "backlog-full");
  const { col, name } = await recordingTrigger(s, "full/+", 30);
  await publishBurst(o, s, "full", 60);
  // every publish either ran or was recorded as not run
  let ran: number[] = [], failed: Awaited<ReturnType<typeof failedRuns>> = [];
  const settled = await waitFor(async () => {
    ran = await rows(s, col.id);
    failed = await failedRuns(s);
    return ran.length + failed.length === 60;
  }, 60_000);
  t.ok(settled, `ran ${ran.length} + recorded ${failed.length} = 60`);
  t.ok(failed.length > 0, "some runs could not wait");
  t.ok(ran.length >= 5, "the runs the backlog held ran");
  const all = [...ran, ...failed.map((f) => Number(f.params.body))].sort((a, b) => a - b);
  t.same(all, Array.from({ length: 60 }, (_, i) => i), "each publish exactly once, ran or recorded");
  for (const f of failed) {
    t.equal(f.service_name, name);
    t.equal(f.trigger, "Messaging::Publish");
    t.match(f.error, /^not run: 5 runs of this system's triggers were waiting/);
  }
  // the retry runs them (as the developer asking)
  const ids = failed.map((f) => f.id);
  const retried = await s.dev.post(`/codeadmin/failed/${s.systemKey}`, { id: ids });
  t.equal(retried.status, 200, "retry answered");
  t.same((await rows(s, col.id)).sort((a, b) => a - b), Array.from({ length: 60 }, (_, i) => i), "after the retry every publish has its row");
  t.same(await failedRuns(s), [], "the retried runs are no longer listed");
});

t.test("a node that stops with runs waiting records them as failed runs", async (t) => {
  const o = await startOutpost({ args: ["--code-queue", "1", "--code-workers", "1"], keepData: true });
  let stopped = false;
  t.teardown(async () => { if (!stopped) await o.stop(); });
  const s = await devWithSystem(o, "backlog-stop");
  const { col } = await recordingTrigger(s, "stop/+", 200);
  await publishBurst(o, s, "stop", 30);
  // the first runs are under way (one at a time, 200 ms each): the rest wait when the node stops
  t.ok(await waitFor(async () => (await rows(s, col.id)).length >= 1, 20_000), "the first run ended");
  await o.stop();
  stopped = true;
  const again = await startOutpost({ dataDir: o.dataDir, args: ["--code-queue", "1", "--code-workers", "1"] });
  t.teardown(() => again.stop());
  const dev = new Client(again.url, { "ClearBlade-DevToken": s.devToken });
  const ran = await dev.get(`/api/v/1/data/${col.id}?query=${qs({ PAGESIZE: 0, PAGENUM: 0 })}`);
  const failed = await dev.get(`/codeadmin/failed/${s.systemKey}`);
  t.equal(failed.status, 200);
  const recorded = failed.body[s.systemKey] as { error: string; params: { body: string } }[];
  const rowsOf = new Set<number>(ran.body.DATA.map((x: { n: number }) => x.n));
  // (a run under way when the node stopped may have ended either way: only the waiting ones are
  // sure to be recorded as not run)
  const notRun = recorded.filter((f) => /^not run: the node stopped before it ran/.test(f.error)).map((f) => Number(f.params.body));
  t.ok(notRun.length > 0, "the runs left waiting were recorded as not run");
  t.same(notRun.filter((n) => rowsOf.has(n)), [], "a run recorded as not run has no row");
  const accounted = new Set([...rowsOf, ...recorded.map((f) => Number(f.params.body))]);
  t.same([...accounted].sort((a, b) => a - b), Array.from({ length: 30 }, (_, i) => i), "each publish ran or was recorded");
});
