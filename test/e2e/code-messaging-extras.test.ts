// Messaging extras of the service library, black-box: message history from code
// (getMessageHistory, getMessageHistoryWithTimeFrame, getAndDeleteMessageHistory,
// ClearBladeAsync.MessageHistory().read), getCurrentTopics, and the messaging timers
// (setTimeout/cancelCBTimeout, setInterval/cancelCBInterval) that publish after the run ended,
// seen by a real MQTT subscriber; with missing rights, wrong types, bounds and other systems.
import mqtt, { type MqttClient } from "mqtt";
import t, { type Test } from "tap";
import { J, ok, refused, run, settleAs, userWith } from "./code-run.ts";
import { type DevSystem, devWithSystem, must, sleep, startOutpost, uniq, waitFor } from "./harness.ts";

const o = await startOutpost();
const clients = new Set<MqttClient>();
t.teardown(async () => { for (const c of clients) c.end(true); await o.stop(); });
const s = await devWithSystem(o, "cmsg-a");
const s2 = await devWithSystem(o, "cmsg-b");
const SK = s.systemKey;

/** A developer's MQTT client of `sys` that records what it receives on `topic`. */
async function listen(sys: DevSystem, topic: string): Promise<{ got: string[]; c: MqttClient }> {
  const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${o.mqttPort}`, { reconnectPeriod: 0, clientId: uniq("m"), username: sys.devToken, password: sys.systemKey, protocolVersion: 4 });
  clients.add(c);
  const got: string[] = [];
  c.on("message", (_t, payload) => got.push(payload.toString("utf8")));
  await c.subscribeAsync(topic, { qos: 1 });
  return { got, c };
}
const publish = (topic: string, body: string, sys: DevSystem = s) => must(sys.dev.post(`/api/v/1/message/${sys.systemKey}/publish`, { topic, body }), "publish");

t.test("history: the newest messages, a time frame, get-and-delete, MessageHistory().read", async (t) => {
  const topic = uniq("hist/t");
  for (const m of ["m1", "m2", "m3", "m4"]) await publish(topic, m);
  const now = Math.floor(Date.now() / 1000);
  const out = ok(t, await run(s, `var M = ClearBlade.Messaging();
    M.getMessageHistory(${J(topic)}, 0, 2, function (err, newest) {
      if (err) return done(err, newest);
      M.getMessageHistoryWithTimeFrame(${J(topic)}, 0, null, ${now - 60}, ${now + 60}, function (err, frame) {
        if (err) return done(err, frame);
        M.getMessageHistoryWithTimeFrame(${J(topic)}, 0, ${now - 3600}, null, null, function (err, before) {
          resp.success({ newest: newest, frame: frame.map(function (m) { return m.payload; }), before: before });
        });
      });
    });`), "history");
  t.same(out.newest.map((m: any) => m.payload), ["m4", "m3"], "newest first, count 2");
  t.match(out.newest[0], { topicid: topic, payload: "m4", payloadsize: 2, time: Number, qos: Number, userid: s.devId }, "the REST history row");
  t.same(out.frame, ["m4", "m3", "m2", "m1"], "everything in the frame");
  t.same(out.before, [], "nothing before an hour ago");

  const q = ok(t, await run(s, settleAs(`ClearBladeAsync.MessageHistory().read(ClearBladeAsync.Query().equalTo("topicid", ${J(topic)}).greaterThanEqualTo("time", ${now - 60}).setPage(3, 1))`)), "MessageHistory().read");
  t.same(q.map((m: any) => m.payload), ["m4", "m3", "m2"], "a page of 3");

  const taken = ok(t, await run(s, `ClearBlade.Messaging().getAndDeleteMessageHistory(${J(topic)}, 3, null, null, null, done);`), "get and delete");
  t.same(taken.map((m: any) => m.payload), ["m4", "m3", "m2"], "the three newest, returned");
  const left = ok(t, await run(s, `ClearBlade.Messaging().getMessageHistory(${J(topic)}, null, 0, done);`), "what is left");
  t.same(left.map((m: any) => m.payload), ["m1"], "and deleted");
  const rest = await must(s.dev.get(`/api/v/1/message/${SK}?topic=${encodeURIComponent(topic)}&count=0`), "REST history");
  t.same(rest.map((m: any) => m.payload), ["m1"], "REST agrees");
});

t.test("history: getMessageHistory's rows carry ClearBlade's message and send-date; getAndDeleteMessageHistory's do not", async (t) => {
  // ClearBlade's own services read the classic calls' rows as e.message / e["send-date"] and tell
  // them from getAndDeleteMessageHistory's (payload / time) by whether "message" is there
  const topic = uniq("hist/c");
  await publish(topic, '{"temperature":21}');
  const out = ok(t, await run(s, `var M = ClearBlade.Messaging();
    M.getMessageHistory(${J(topic)}, null, 1, function (err, rows) {
      if (err) return done(err, rows);
      M.getMessageHistoryWithTimeFrame(${J(topic)}, 1, null, null, null, function (err, framed) {
        if (err) return done(err, framed);
        M.getAndDeleteMessageHistory(${J(topic)}, 1, null, null, null, function (err, taken) {
          resp.success({ parsed: JSON.parse(rows[0].message), row: rows[0], framed: framed[0], taken: taken[0] });
        });
      });
    });`), "classic history");
  t.same(out.parsed, { temperature: 21 }, "JSON.parse(row.message) is the payload");
  t.match(out.row, { message: '{"temperature":21}', "send-date": Number, payload: '{"temperature":21}', topicid: topic }, "message and send-date beside the REST row's fields");
  t.equal(out.row["send-date"], out.row.time, "send-date is the time in epoch seconds");
  t.match(out.framed, { message: '{"temperature":21}', "send-date": out.row.time }, "the time-frame call too");
  t.notOk("message" in out.taken, "get-and-delete's rows keep the table's fields only");
  t.equal(out.taken.payload, '{"temperature":21}');
});

t.test("history: rights, wrong types, another system's topics", async (t) => {
  const topic = uniq("hist/p");
  await publish(topic, "secret");
  const nobody = await userWith(s, {});
  refused(t, await run(s, `ClearBlade.Messaging().getMessageHistory(${J(topic)}, 0, 10, done);`, nobody.client), /message history/, 401, "read without msgHistory");
  const reader = await userWith(s, { msgHistory: 1 });
  const got = ok(t, await run(s, `ClearBlade.Messaging().getMessageHistory(${J(topic)}, 0, 10, done);`, reader.client), "read with it");
  t.same(got.map((m: any) => m.payload), ["secret"]);
  refused(t, await run(s, `ClearBlade.Messaging().getAndDeleteMessageHistory(${J(topic)}, 0, null, null, null, done);`, reader.client), /message history/, 401, "delete needs delete");
  // the same topic name in another system: its history is not this one's
  await publish(topic, "theirs", s2);
  const mine = ok(t, await run(s, `ClearBlade.Messaging().getMessageHistory(${J(topic)}, 0, 0, done);`), "same topic name");
  t.same(mine.map((m: any) => m.payload), ["secret"], "only this system's messages");
  for (const [code, re] of [
    [`ClearBlade.Messaging().getMessageHistory(42, 0, 1, done);`, /topic is required/],
    [`ClearBlade.Messaging().getMessageHistory("a/#", 0, 1, done);`, /wildcards/],
    [`ClearBlade.Messaging().getMessageHistory("a", 0, -1, done);`, /count must be/],
    [`ClearBlade.Messaging().getMessageHistoryWithTimeFrame("a", 0, "yesterday", null, null, done);`, /last must be a number/],
    [`ClearBlade.Messaging().getMessageHistory("${"x".repeat(1025)}", 0, 1, done);`, /topic is required/],
    [settleAs(`ClearBladeAsync.MessageHistory().read(ClearBladeAsync.Query().equalTo("payload", "x"))`), /topicid/],
    [settleAs(`ClearBladeAsync.MessageHistory().read(ClearBladeAsync.Query().equalTo("topicid", "a").setPage(10, 2))`), /first page/],
  ] as [string, RegExp][]) refused(t, await run(s, code), re, 400, code.slice(0, 80));
});

t.test("getCurrentTopics: the topics with live subscriptions, of this system", async (t) => {
  const topic = uniq("live/t");
  const l = await listen(s, topic);
  const theirs = uniq("live/theirs");
  const l2 = await listen(s2, theirs);
  const topics = ok(t, await run(s, `ClearBlade.Messaging().getCurrentTopics(done);`), "current topics");
  t.ok(topics.includes(topic), "the subscribed topic is listed");
  t.notOk(topics.includes(theirs), "another system's is not");
  l.c.end(true);
  l2.c.end(true);
});

/** Cancels an interval from another run, then checks its topic gets no more ticks. */
async function cancelledInterval(t: Test, id: string, l: { got: string[] }, what: string) {
  ok(t, await run(s, `ClearBlade.Messaging().cancelCBInterval(${J(id)}, done);`), what);
  await sleep(300);
  const n = l.got.length;
  await sleep(500);
  t.equal(l.got.length, n, "no more ticks after the cancel");
}

t.test("setTimeout and setInterval publish after the run ended; cancel stops them", async (t) => {
  const topic = uniq("tm/t");
  const l = await listen(s, topic);
  const ids = ok(t, await run(s, `var M = ClearBlade.Messaging();
    M.setTimeout(300, ${J(topic)}, "later", function (err, a) {
      if (err) return done(err, a);
      M.setTimeout(400, ${J(topic)}, "cancelled", function (err, b) {
        M.cancelCBTimeout(b, function (err, c) {
          if (err) return done(err, c);
          M.setInterval(150, ${J(topic)}, "tick", 3, function (err, d) { resp.success({ a: a, b: b, cancelled: c, d: d }); });
        });
      });
    });`), "set timers");
  t.match(ids, { a: /^[0-9a-f]{30}$/, b: /^[0-9a-f]{30}$/, d: /^[0-9a-f]{30}$/ }, "the callbacks get timer ids");
  t.equal(ids.cancelled, ids.b, "cancel answers the id");
  t.same(l.got, [], "nothing yet: the run has ended");
  t.ok(await waitFor(() => l.got.length >= 4, 5_000), `the timeout and 3 ticks arrive (${l.got.join(",")})`);
  await sleep(600);
  t.same([...l.got].sort(), ["later", "tick", "tick", "tick"], "no more, and not the cancelled one");

  const topic2 = uniq("tm/i");
  const l2 = await listen(s, topic2);
  const id = ok(t, await run(s, `ClearBlade.Messaging().setInterval(100, ${J(topic2)}, { n: 1 }, 1000, done);`), "a long interval");
  t.ok(await waitFor(() => l2.got.length >= 2, 5_000), "it ticks");
  await cancelledInterval(t, id, l2, "cancelled by another run");
  t.equal(l2.got[0], '{"n":1}', "an object is published as JSON");
  l.c.end(true);
  l2.c.end(true);

  // ClearBlade's own forms: iterations -1 (until cancelled), a 30 ms period (its docs' example)
  const topic3 = uniq("tm/forever");
  const l3 = await listen(s, topic3);
  const forever = ok(t, await run(s, `ClearBlade.Messaging().setInterval(30, ${J(topic3)}, "again", -1, done);`), "an interval until cancelled, of 30 ms");
  t.ok(await waitFor(() => l3.got.length >= 4, 5_000), "it keeps ticking");
  await cancelledInterval(t, forever, l3, "cancelled");
  l3.c.end(true);
});

t.test("messaging timers: publish rights, bounds, wrong types, another system's ids", async (t) => {
  const nobody = await userWith(s, {});
  refused(t, await run(s, `ClearBlade.Messaging().setTimeout(100, "no/right", "x", done);`, nobody.client), /publish to topic/, 401, "a timer needs the publish permission");
  const pub = await userWith(s, { topics: [{ itemInfo: { name: "ok/#" }, permissions: 2 }] });
  const topic = `ok/${uniq("u")}`;
  const l = await listen(s, topic);
  ok(t, await run(s, `ClearBlade.Messaging().setTimeout(50, ${J(topic)}, "from a user", done);`, pub.client), "with it");
  t.ok(await waitFor(() => l.got.includes("from a user"), 5_000), "published as the user");
  // the right is the user's as it is at each firing: taking the role away ends the interval
  ok(t, await run(s, `ClearBlade.Messaging().setInterval(100, ${J(topic)}, "tick", 1000, done);`, pub.client), "an interval of the user");
  t.ok(await waitFor(() => l.got.includes("tick"), 5_000), "it ticks");
  await must(s.dev.put(`/admin/user/${SK}`, { user: pub.userId, changes: { roles: { delete: [pub.roleId] } } }), "take the role away");
  await sleep(300);
  const n = l.got.length;
  await sleep(500);
  t.equal(l.got.length, n, "no tick after the user lost the right");
  t.match(o.logs(), /messaging timer's publish was refused/, "the refused firing ended it");
  l.c.end(true);

  for (const [code, re] of [
    [`ClearBlade.Messaging().setInterval(-10, "a", "x", 2, done);`, /from 0 to 86400000/],
    [`ClearBlade.Messaging().setTimeout(86400001, "a", "x", done);`, /from 0 to 86400000/],
    [`ClearBlade.Messaging().setTimeout("soon", "a", "x", done);`, /milliseconds/],
    [`ClearBlade.Messaging().setTimeout(100, "a/+", "x", done);`, /without wildcards/],
    [`ClearBlade.Messaging().setTimeout(100, "a", "x".repeat(65537), done);`, /larger than 65536 bytes/],
    [`ClearBlade.Messaging().setInterval(100, "a", "x", 0, done);`, /iterations/],
    [`ClearBlade.Messaging().setInterval(100, "a", "x", "forever", done);`, /iterations/],
    [`ClearBlade.Messaging().cancelCBTimeout("0123456789abcdef0123456789abcd", done);`, /no timeout/],
    [`ClearBlade.Messaging().cancelCBInterval(null, done);`, /id is required/],
  ] as [string, RegExp][]) refused(t, await run(s, code), re, undefined, code.slice(0, 80));

  // another system cannot cancel this system's timer
  const id = ok(t, await run(s, `ClearBlade.Messaging().setTimeout(60000, "far/away", "x", done);`), "a timer");
  refused(t, await run(s2, `ClearBlade.Messaging().cancelCBTimeout(${J(id)}, done);`), /no timeout/, 404, "another system's id");
  refused(t, await run(s, `ClearBlade.Messaging().cancelCBInterval(${J(id)}, done);`), /cancelCBTimeout/, 400, "a timeout is not an interval");
  ok(t, await run(s, `ClearBlade.Messaging().cancelCBTimeout(${J(id)}, done);`), "its own system may");

  // at most 100 waiting per system
  const fill = ok(t, await run(s2, `var M = ClearBlade.Messaging(), n = 0;
    function next() { M.setTimeout(60000, "fill", "x", function (err, d) { if (err) return resp.success({ n: n, err: d.detail }); n++; next(); }); }
    next();`), "fill up");
  t.same(fill, { n: 100, err: "this system already has 100 messaging timers waiting (cancel some first)" }, "the 101st is refused");
  ok(t, await run(s, `ClearBlade.Messaging().setTimeout(60000, "other/system", "x", done);`), "another system is not affected");
});

t.test("deleting a system cancels its messaging timers", async (t) => {
  const sys = await devWithSystem(o, "cmsg-gone");
  const topic = uniq("gone/t");
  ok(t, await run(sys, `ClearBlade.Messaging().setInterval(100, ${J(topic)}, "x", 1000, done);`), "an interval");
  await must(sys.dev.del(`/admin/systemmanagement?id=${sys.systemKey}`), "delete the system");
  await sleep(500);
  t.notOk(o.logs().includes(topic), "it was cancelled with the system, not left to fail at its next firing");
});
