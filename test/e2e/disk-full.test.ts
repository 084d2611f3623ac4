// A full disk, for real: the data directory on a small tmpfs (mounted here: root only) filled to
// its last byte. Writes answer 507 with Retry-After and a message saying why, never a bare 500;
// reads go on; /health says so within 2 s; MQTT clients stay connected, QoS 1 publishes are
// acknowledged and delivered, a retained message published meanwhile is served to new subscribers
// and kept (it is in the database after a restart once space was freed), and a persistent session
// that was away gets what was queued for it. Everything recovers without a restart.
import { spawnSync } from "node:child_process";
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import mqtt, { type MqttClient } from "mqtt";
import t from "tap";
import { collectionWith, devWithSystem, isEnvelope, mqttFlush, needs, type Outpost, request, startOutpost, uniq, waitFor } from "./harness.ts";

const mnt = mkdtempSync(join(tmpdir(), "outpost-full-"));
const mounted = process.getuid?.() === 0 && spawnSync("mount", ["-t", "tmpfs", "-o", "size=48m", "tmpfs", mnt]).status === 0;
t.teardown(() => { if (mounted) spawnSync("umount", ["-l", mnt]); rmSync(mnt, { recursive: true, force: true }); });
const opts = await needs("a tmpfs of its own (mount -t tmpfs, as root)", mounted);

const FILLER = join(mnt, "filler");
/** Whether a publish was acknowledged within 10 s. */
const acked = (p: Promise<unknown>) => Promise.race([p.then(() => true, () => false), new Promise<boolean>((r) => setTimeout(() => r(false), 10_000))]);
/** Writes to the filler until the file system has no byte left. Called again before each check:
 *  the database gives space back now and then (its log is reset after a checkpoint). */
function fill() {
  const fd = openSync(FILLER, "a");
  try {
    for (const size of [1 << 20, 64 << 10, 4 << 10, 512, 1]) {
      const chunk = Buffer.alloc(size, 1);
      try { for (;;) writeSync(fd, chunk); } catch (e) { if ((e as NodeJS.ErrnoException).code !== "ENOSPC") throw e; }
    }
  } finally { closeSync(fd); }
}

t.test("a full disk: writes answer 507, MQTT sessions and retained messages are kept, all recovers once space is freed", opts, async (t) => {
  const dataDir = join(mnt, "data");
  mkdirSync(dataDir);
  const args = ["--db", `file:${join(dataDir, "outpost.db")}`, "--min-free-mb", "1"];
  let o: Outpost = await startOutpost({ dataDir, args, logLevel: "info" });
  t.teardown(() => o.stop());
  const s = await devWithSystem(o, "full");
  const col = await collectionWith(s, [["label", "string"]]);
  await s.dev.post(`/api/v/1/data/${col.id}`, { label: "before" });
  const clients: MqttClient[] = [];
  t.teardown(() => { for (const c of clients) c.end(true); });
  const received = (c: MqttClient) => { const got: string[] = []; c.on("message", (topic, p, packet) => got.push(`${topic}=${p}${packet.retain ? " (retained)" : ""}`)); return got; };
  /** A connected client; `got` lists what it receives from the start (a resumed session's queue
   *  can come in the same read as the CONNACK, before code after an awaited connect runs). */
  const connectReceiving = async (clientId: string, clean: boolean, port = o.mqttPort) => {
    const c = mqtt.connect(`mqtt://127.0.0.1:${port}`, { username: s.devToken, password: s.systemKey, clientId, clean, protocolVersion: 4, reconnectPeriod: 0 });
    clients.push(c);
    const got = received(c);
    await new Promise<void>((resolve, reject) => { c.once("connect", () => resolve()); c.once("error", reject); });
    return { c, got };
  };
  const connect = async (clientId: string, clean: boolean, port = o.mqttPort) => (await connectReceiving(clientId, clean, port)).c;
  // a persistent session that is away while the disk is full
  const awayId = uniq("away");
  const away = await connect(awayId, false);
  await away.subscribeAsync("t/#", { qos: 1 });
  await away.endAsync();
  const sub = await connect(uniq("sub"), false);
  await sub.subscribeAsync("t/#", { qos: 1 });
  const got = received(sub);
  const pub = await connect(uniq("pub"), true);
  let closes = 0;
  for (const c of [sub, pub]) c.on("close", () => closes++);
  await pub.publishAsync("t/r", "r1", { qos: 1, retain: true });

  fill();
  const w = await s.dev.post(`/api/v/1/data/${col.id}`, { label: "full" });
  t.equal(w.status, 507, "a write: 507");
  t.ok(isEnvelope(w.body, 507), "in the error envelope");
  t.match(w.body.error, { code: 114, message: "Insufficient storage", detail: /disk is full: nothing was written/ });
  t.equal(w.headers["retry-after"], "30", "with Retry-After");
  fill();
  const signIn = await request(o.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
  t.equal(signIn.status, 507, `a sign-in (it writes a token): 507 ${signIn.text}`);
  fill();
  t.equal((await s.app.post("/api/v/1/user/reg", { email: `${uniq("u")}@example.com`, password: "user-password-1" })).status, 507, "a registration: 507");
  const read = await s.dev.get(`/api/v/1/data/${col.id}`);
  t.equal(read.status, 200, "reads go on");
  t.same(read.body.DATA.map((r: any) => r.label), ["before"]);
  t.ok(await waitFor(async () => { fill(); return (await request(o.url, "GET", "/health")).status === 503; }, 3_000, 200), "/health: 503 within 2 s");
  t.match((await request(o.url, "GET", "/health")).body.reasons.join("\n"), /disk holding the database has 0 MB free/);

  fill();
  t.ok(await acked(pub.publishAsync("t/a", "q1", { qos: 1 })), "a QoS 1 publish is acknowledged");
  fill();
  t.ok(await acked(pub.publishAsync("t/r", "r2", { qos: 1, retain: true })), "a retained one too");
  await mqttFlush(sub);
  t.same(got, ["t/r=r1", "t/a=q1", "t/r=r2"], "and delivered to a persistent session");
  fill();
  const late = await connect(uniq("late"), true);
  const lateGot = received(late);
  await late.subscribeAsync("t/r", { qos: 1 });
  await mqttFlush(late);
  t.same(lateGot, ["t/r=r2 (retained)"], "a new subscriber gets the retained message published while the disk is full");
  t.equal(closes, 0, "no client was disconnected");
  t.ok(pub.connected && sub.connected, "publisher and subscriber still connected");
  t.match(o.logs(), /writes are refused \(507\) until space is freed/, "the log says the disk is full");

  rmSync(FILLER);
  t.ok(await waitFor(async () => (await request(o.url, "GET", "/health")).status === 200, 10_000), "healthy again once space is freed");
  t.equal((await s.dev.post(`/api/v/1/data/${col.id}`, { label: "after" })).status, 200, "writes work again, without a restart");
  t.ok(await waitFor(() => /messages held for a full disk are written/.test(o.logs()), 10_000), "what MQTT held is written");
  const { c: back, got: backGot } = await connectReceiving(awayId, false);
  // its queue is sent after the CONNACK, read from the database as it goes
  t.ok(await waitFor(() => backGot.length >= 3, 10_000), `the session that was away gets its queue: ${backGot.join(", ")}`);
  await mqttFlush(back);
  t.same(backGot.map((m) => m.replace(" (retained)", "")), ["t/r=r1", "t/a=q1", "t/r=r2"], "what was queued before and while the disk was full, in order");

  for (const c of clients) c.end(true);
  await o.stop();
  o = await startOutpost({ dataDir, args });
  const again = await connect(uniq("again"), true);
  const againGot = received(again);
  await again.subscribeAsync("t/r", { qos: 1 });
  await mqttFlush(again);
  t.same(againGot, ["t/r=r2 (retained)"], "after a restart the retained message is the one published while the disk was full");
});
