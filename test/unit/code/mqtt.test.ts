// MQTT.Client and MQTT.Message in a real sandbox, with the library's host operations answered on
// this thread against a fake of this node's broker (the domain's publish/subscribe with its
// refusals) and a real external broker (mosquitto, where installed): messages both ways, bytes,
// the event loop's lifetime, failure paths, limits, the queue bound, shared subscriptions, and the
// egress check external connections pass.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import mqtt from "mqtt";
import { topicMatches } from "../../../src/auth/permissions.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import { fail } from "../../../src/core/errors.ts";
import { createLogger } from "../../../src/core/log.ts";
import { OPS } from "../../../src/code/library/index.ts";
import { validFilter } from "../../../src/code/library/mqtt.ts";
import { EgressPolicy } from "../../../src/code/egress.ts";
import { type HostContext, RunState } from "../../../src/code/library/types.ts";
import { MQTT_LIMITS, type MqttEvent, RunMqtt, externalConn, messageEvent } from "../../../src/code/mqtt-clients.ts";
import { type RunOutcome, Sandbox, outcomeValue } from "../../../src/code/sandbox.ts";

const SK = "sys-a";
const USER: Principal = { kind: "user", id: "u1", email: "u1@example.com", systemKey: SK, tokenHash: "" } as Principal;

/** This node's broker as the domain offers it: topics per system, refusals by topic. */
class FakeBus {
  readonly subs = new Map<number, { sk: string; filter: string; deliver: (t: string, p: Buffer, q: number) => void }>();
  readonly published: { sk: string; topic: string; payload: Buffer; qos: number; retain: boolean; who: string }[] = [];
  readonly noPublish = new Set<string>();
  readonly noSubscribe = new Set<string>();
  private seq = 0;

  async publish(p: Principal, sk: string, b: { topic: string; body: Buffer | string; qos: number; retain: boolean }) {
    if (this.noPublish.has(b.topic)) throw fail("PERMISSION_DENIED", `publish to topic '${b.topic}'`);
    const payload = Buffer.isBuffer(b.body) ? b.body : Buffer.from(b.body);
    this.published.push({ sk, topic: b.topic, payload, qos: b.qos, retain: b.retain, who: (p as { id: string }).id });
    this.send(sk, b.topic, payload, b.qos);
    return {};
  }
  /** turns of the shared groups (system, group and filter) */
  private readonly turns = new Map<string, number>();

  async subscribe(_p: Principal, sk: string, filter: string, deliver: (t: string, p: Buffer, q: number) => void) {
    // a shared subscription needs the right to its filter (as the domain checks it)
    const share = /^\$share\/([^/+#]+)\/(.+)$/.exec(filter);
    if (filter.startsWith("$share/") && !share) throw fail("INVALID_ARGUMENT", "a shared subscription is $share/<group>/<filter>, the group without wildcards");
    const name = share ? share[2]! : filter;
    if (this.noSubscribe.has(name)) throw fail("PERMISSION_DENIED", `subscribe to topic '${name}'`);
    const id = ++this.seq;
    this.subs.set(id, { sk, filter, deliver });
    return async () => { this.subs.delete(id); };
  }
  /** Every matching plain subscription gets the message; each shared group, one member in turn. */
  send(sk: string, topic: string, payload: Buffer | string, qos = 0) {
    const bytes = Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
    const groups = new Map<string, ((t: string, p: Buffer, q: number) => void)[]>();
    for (const s of [...this.subs.values()]) {
      if (s.sk !== sk) continue;
      const share = /^\$share\/([^/]+)\/(.+)$/.exec(s.filter);
      if (!share) { if (topicMatches(s.filter, topic)) s.deliver(topic, bytes, qos); continue; }
      if (!topicMatches(share[2]!, topic)) continue;
      const key = `${sk}\u0000${s.filter}`;
      groups.set(key, [...(groups.get(key) ?? []), s.deliver]);
    }
    for (const [key, members] of groups) {
      const turn = this.turns.get(key) ?? 0;
      this.turns.set(key, turn + 1);
      members[turn % members.length]!(topic, bytes, qos);
    }
  }
  filters(sk = SK) { return [...this.subs.values()].filter((s) => s.sk === sk).map((s) => s.filter).sort(); }
}

interface Setup { bus?: FakeBus; egressAllow?: string[]; p?: Principal; sk?: string }

function context(o: Setup = {}) {
  const bus = o.bus ?? new FakeBus();
  const config = { httpHost: "0.0.0.0", mqttPort: 1883, mqttTlsPort: 1884, ...(o.egressAllow ? { codeEgressAllow: o.egressAllow } : {}) };
  const ctx = {
    p: o.p ?? USER, systemKey: o.sk ?? SK, depth: 0, run: new RunState(),
    e: { messages: bus, d: { config, log: createLogger("silent"), tokens: { resolve: async () => null } }, systems: { access: async () => ({}) }, egress: EgressPolicy.parse(o.egressAllow ?? []) },
    execute: async () => { throw new Error("not here"); },
  } as unknown as HostContext;
  return { ctx, bus };
}

const opened: Sandbox[] = [];
afterAll(() => { for (const s of opened) s.dispose(); });

/** Runs `code` (a function svc) with its host calls answered by the library's operations as the
 *  engine answers them (each called at once, in order); closes what the run opened at its end. */
async function runService(code: string, o: Setup & { timeoutMs?: number; params?: unknown; onStart?: (c: ReturnType<typeof context>) => void } = {}) {
  const c = context(o);
  const sb = await Sandbox.create({ libraries: [], service: { name: "svc", code }, meta: {} }, { memoryBytes: 64 << 20, sliceMs: 1_000 });
  opened.push(sb);
  const logs: string[] = [];
  const started = sb.run("svc", { context: JSON.stringify({ systemKey: SK, caller: {} }), params: JSON.stringify(o.params ?? {}), instanceId: "i" }, {
    host: (op, json, answer) => {
      const fn = OPS.get(op);
      let r: unknown;
      try { r = fn ? fn(c.ctx, JSON.parse(json) ?? {}) : Promise.reject(new Error(`no op ${op}`)); } catch (e) { r = Promise.reject(e); }
      Promise.resolve(r).then(
        (d) => answer(JSON.stringify({ ok: true, data: d ?? null })),
        (e) => answer(JSON.stringify({ ok: false, error: { detail: (e as { detail?: string }).detail ?? String(e) } })),
      );
    },
    log: (t) => logs.push(t),
  }, o.timeoutMs ?? 5_000);
  o.onStart?.(c);
  const out: RunOutcome = await started;
  await c.ctx.run.close(() => {});
  return { ...c, logs, outcome: out, value: out.kind === "failed" ? out.error : outcomeValue(out.raw) };
}

const waitUntil = async (pred: () => boolean, ms = 5_000) => {
  for (const end = Date.now() + ms; !pred();) { if (Date.now() > end) throw new Error("condition not met in time"); await Bun.sleep(5); }
};

// ---- MQTT.Message ------------------------------------------------------------------------------

describe("MQTT.Message", () => {
  test("text and bytes of a payload, from text or from bytes, with or without new", async () => {
    const r = await runService(`function svc(req, resp) {
      var a = new MQTT.Message("héllo ✓"), b = MQTT.Message(new Uint8Array([0x68, 0xC3, 0xA9, 0xFF])), c = new MQTT.Message();
      var bytesA = Array.prototype.slice.call(a.payload_bytes);
      a.payload = "x";
      var bytesA2 = Array.prototype.slice.call(a.payload_bytes);
      c.payload_bytes = new Uint8Array([1, 2, 3]);
      a.user_properties.k = "v";
      resp.success({ a: a.payload, bytesA: bytesA, bytesA2: bytesA2, b: b.payload, bytesB: Array.prototype.slice.call(b.payload_bytes), c: Array.prototype.slice.call(c.payload_bytes),
        fields: [a.topic, a.qos, a.retain, a.duplicate, a.user_properties.k], json: JSON.parse(JSON.stringify(c)), isMessage: b instanceof MQTT.Message });
    }`);
    expect(r.value).toEqual({
      a: "x", bytesA: [...Buffer.from("héllo ✓")], bytesA2: [0x78], b: "hé\uFFFD", bytesB: [0x68, 0xC3, 0xA9, 0xFF], c: [1, 2, 3],
      fields: ["", 0, false, false, "v"], json: { payload: "\u0001\u0002\u0003", topic: "", qos: 0, retain: false, duplicate: false, user_properties: {} }, isMessage: true,
    });
  });
});

// ---- this node's broker ------------------------------------------------------------------------------

describe("MQTT.Client on this node's broker", () => {
  test("publish: text, bytes, a Message (its topic, qos, retain unless given), JSON values; as the run's user in its system", async () => {
    const r = await runService(`function svc(req, resp) {
      var c = new MQTT.Client();
      var m = new MQTT.Message(new Uint8Array([0, 255, 10])); m.topic = "from/message"; m.qos = 1; m.retain = true;
      Promise.all([c.publish("t/text", "hi"), c.publish("t/bytes", new Uint8Array([1, 2, 250]), 2, false), c.publish("", m), c.publish("t/over", m, 0, false),
        c.publish("t/json", { a: 1 }), c.publish("t/num", 42)]).then(function (all) { resp.success(all); }, function (e) { resp.error(e.message); });
    }`);
    expect(r.outcome.kind).toBe("success");
    expect(r.value).toEqual([null, null, null, null, null, null]);
    const got = r.bus.published.map((p) => [p.sk, p.topic, [...p.payload], p.qos, p.retain, p.who]);
    expect(got).toEqual([
      [SK, "t/text", [...Buffer.from("hi")], 0, false, "u1"],
      [SK, "t/bytes", [1, 2, 250], 2, false, "u1"],
      [SK, "from/message", [0, 255, 10], 1, true, "u1"],
      [SK, "t/over", [0, 255, 10], 0, false, "u1"],
      [SK, "t/json", [...Buffer.from('{"a":1}')], 0, false, "u1"],
      [SK, "t/num", [...Buffer.from("42")], 0, false, "u1"],
    ]);
  });

  test("a publish the service does not wait for still happens when the service ends at once", async () => {
    const r = await runService(`function svc(req, resp) { var c = new MQTT.Client(); c.publish("fire/forget", "x"); resp.success("done"); }`);
    expect(r.value).toBe("done");
    expect(r.bus.published.map((p) => p.topic)).toEqual(["fire/forget"]);
  });

  test("wrong arguments reject with what is wrong; nothing is published", async () => {
    const bus = new FakeBus();
    bus.noPublish.add("denied");
    const r = await runService(`function svc(req, resp) {
      var c = new MQTT.Client(), out = [];
      var tries = [
        function () { // first: built and sent from the entry function itself
          return c.publish("t", new Array(${MQTT_LIMITS.payloadBytes / 4}).join("abcd") + "abcde"); },
        function () { return c.publish("t", "x", 3); },
        function () { return c.publish("t", "x", "1"); },
        function () { return c.publish("t", "x", 0, "yes"); },
        function () { return c.publish("a/+/b", "x"); },
        function () { return c.publish("", "x"); },
        function () { return c.publish(42, "x"); },
        function () { return c.publish("t"); },
        function () { return c.publish("t", function () {}); },
        function () { return c.publish("t", new Uint8Array(${MQTT_LIMITS.payloadBytes + 1})); },
        function () { return c.publish("denied", "x"); },
        function () { return c.subscribe("a/#/b", function () {}); },
        function () { return c.subscribe(["ok", 5], function () {}); },
        function () { return c.subscribe([], function () {}); },
        function () { return c.subscribe("t"); },
        function () { return c.subscribe("$share/g+/t", function () {}); },
        function () { return new MQTT.Client({ port: "1883", address: "example.com" }).publish("t", "x"); },
        function () { return new MQTT.Client({ keepalive: -1 }).publish("t", "x"); },
        function () { return new MQTT.Client({ address: "no spaces allowed" }).publish("t", "x"); },
      ];
      function next(i) {
        if (i === tries.length) return resp.success(out);
        var p;
        try { p = tries[i](); } catch (e) { out.push("threw " + e.message); return next(i + 1); }
        p.then(function () { out.push("ok"); next(i + 1); }, function (e) { out.push(e.message); next(i + 1); });
      }
      next(0);
    }`, { bus });
    const out = r.value as string[];
    expect(out).toHaveLength(19);
    const expected = [/at most 4194304 bytes \(this one has 4194305\)/, /qos must be 0, 1 or 2/, /qos must be 0, 1 or 2/, /retain must be a boolean/, /without wildcards/, /without wildcards/, /without wildcards/,
      /payload must be/, /payload must be/, /at most 4194304 bytes/, /publish to topic 'denied'/, /not a topic filter/,
      /must be a string or a non-empty array/, /must be a string or a non-empty array/, /onMessage must be a function/, /not a topic filter/,
      /options.port must be an integer/, /options.keepalive must be an integer/, /options.address must be a host name/];
    expected.forEach((re, i) => expect(out[i]).toMatch(re));
    expect(bus.published).toEqual([]);
  });

  test("subscribe: onMessage(topic, message) for each message, in order, with its text, bytes and QoS, until the service ends", async () => {
    const binary = Buffer.from([0xFF, 0x00, 0x80, 0x41]);
    const r = await runService(`function svc(req, resp) {
      var c = new MQTT.Client(), got = [];
      c.subscribe(["s/+/temp", "bin"], function (topic, m) {
        got.push({ topic: topic, mTopic: m.topic, payload: m.payload, bytes: Array.prototype.slice.call(m.payload_bytes), qos: m.qos, isMessage: m instanceof MQTT.Message });
        if (got.length === 4) resp.success(got);
      }).then(function () { c.publish("ready", "1"); });
    }`, {
      onStart: ({ bus }) => {
        void waitUntil(() => bus.published.some((p) => p.topic === "ready")).then(() => {
          bus.send(SK, "s/a/temp", "21.5", 1);
          bus.send(SK, "s/b/humidity", "not for it");
          bus.send("other-system", "s/c/temp", "another system");
          bus.send(SK, "bin", binary);
          bus.send(SK, "s/é/temp", "ünï");
          bus.send(SK, "s/d/temp", "last", 2);
        });
      },
    });
    expect(r.value).toEqual([
      { topic: "s/a/temp", mTopic: "s/a/temp", payload: "21.5", bytes: [...Buffer.from("21.5")], qos: 1, isMessage: true },
      { topic: "bin", mTopic: "bin", payload: binary.toString("utf8"), bytes: [...binary], qos: 0, isMessage: true },
      { topic: "s/é/temp", mTopic: "s/é/temp", payload: "ünï", bytes: [...Buffer.from("ünï")], qos: 0, isMessage: true },
      { topic: "s/d/temp", mTopic: "s/d/temp", payload: "last", bytes: [...Buffer.from("last")], qos: 2, isMessage: true },
    ]);
    expect(r.bus.filters()).toEqual([]);
  });

  test("a stream-style service republishes what it receives; its subscriptions end with the run", async () => {
    const r = await runService(`function svc(req, resp) {
      var c = new MQTT.Client();
      c.subscribe("in/#", function (topic, m) { c.publish("out/" + topic, m.payload_bytes, 1); });
    }`, {
      timeoutMs: 400,
      onStart: ({ bus }) => { void waitUntil(() => bus.subs.size === 1).then(() => { for (let i = 0; i < 3; i++) bus.send(SK, `in/${i}`, Buffer.from([i, 0xFE])); }); },
    });
    expect(r.outcome).toMatchObject({ kind: "failed", timedOut: true });
    expect(r.bus.published.map((p) => [p.topic, [...p.payload], p.qos])).toEqual([["out/in/0", [0, 0xFE], 1], ["out/in/1", [1, 0xFE], 1], ["out/in/2", [2, 0xFE], 1]]);
    expect(r.bus.subs.size).toBe(0);
  });

  test("a run ends by itself once its last subscription is gone; a refused subscribe neither keeps it waiting nor leaves a subscription", async () => {
    const bus = new FakeBus();
    bus.noSubscribe.add("secret/#");
    const r = await runService(`function svc(req, resp) {
      var c = new MQTT.Client(), out = {};
      c.subscribe("secret/#", function () {}).then(function () { out.secret = "subscribed"; }, function (e) { out.secret = e.message; });
      c.subscribe(["a", "b"], function () {}).then(function () { return c.unsubscribe("a"); }).then(function () { return c.unsubscribe(["b", "never"]); })
        .then(function () { globalThis.__out = out; });
    }`, { bus, timeoutMs: 3_000 });
    expect(r.outcome).toMatchObject({ kind: "success" }); // no timeout: nothing left to wait for
    expect(bus.subs.size).toBe(0);
    const d = await runService(`function svc(req, resp) {
      var c = new MQTT.Client();
      c.subscribe(["ok/1", "secret/#"], function () {}).then(function () { resp.success("subscribed"); }, function (e) { resp.success(e.message); });
    }`, { bus, timeoutMs: 3_000 });
    expect(d.value).toMatch(/subscribe to topic 'secret\/#'/);
    expect(bus.subs.size).toBe(0);
  });

  test("disconnect ends a client's subscriptions; the client refuses afterwards", async () => {
    const r = await runService(`function svc(req, resp) {
      var c = new MQTT.Client();
      c.subscribe(["x/1", "x/2"], function () {}).then(function () { return c.disconnect(); })
        .then(function () { return c.subscribe("x/3", function () {}); }).then(function () { resp.success("subscribed"); }, function (e) { resp.success(e.message); });
    }`);
    expect(r.value).toMatch(/disconnected/);
    expect(r.bus.subs.size).toBe(0);
  });

  test("on_connect is called once the client is connected; an error thrown in a callback fails the run", async () => {
    const r = await runService(`function svc(req, resp) { new MQTT.Client({ on_connect: function () { resp.success("connected"); } }); }`);
    expect(r.value).toBe("connected");
    const f = await runService(`function svc(req, resp) {
      var c = new MQTT.Client();
      c.subscribe("boom", function () { throw new Error("bad message"); }).then(function () { c.publish("boom", "x"); });
    }`);
    expect(f.outcome).toMatchObject({ kind: "failed" });
    expect(f.value).toMatch(/bad message/);
    expect(f.bus.subs.size).toBe(0);
  });

  test("createPublishStream: what is written is published as one message when the stream closes", async () => {
    const r = await runService(`function svc(req, resp) {
      var s = new MQTT.Client().createPublishStream("streamed", 1, false), w = s.getWriter(), locked;
      try { s.getWriter(); } catch (e) { locked = e.message; }
      w.write("ab").then(function () { return w.write(new Uint8Array([0xFF])); }).then(function () { return w.close(); })
        .then(function () { return w.write("late").then(function () { return "written"; }, function (e) { return e.message; }); })
        .then(function (late) { resp.success({ locked: locked, late: late }); });
    }`);
    expect(r.value).toEqual({ locked: "the publish stream is locked to a writer", late: "the publish stream is closed" });
    expect(r.bus.published.map((p) => [p.topic, [...p.payload], p.qos])).toEqual([["streamed", [0x61, 0x62, 0xFF], 1]]);
  });

  test("limits: topic filters per run, clients per run", async () => {
    const r = await runService(`function svc(req, resp) {
      var c = new MQTT.Client(), many = [], out = {};
      for (var i = 0; i < 1000; i++) many.push("f/" + i);
      c.subscribe(many, function () {}).then(function () { out.many = "subscribed"; }, function (e) { out.many = e.message; }).then(function () {
        var clients = [];
        for (var j = 0; j < 20; j++) clients.push(new MQTT.Client().publish("t", "x").then(function () { return "ok"; }, function (e) { return e.message; }));
        return Promise.all(clients);
      }).then(function (all) { out.clients = all; resp.success(out); });
    }`);
    const out = r.value as { many: string; clients: string[] };
    expect(out.many).toMatch(/1 to 256 topic filters/);
    expect(out.clients.filter((c) => c === "ok")).toHaveLength(MQTT_LIMITS.clients - 1);
    expect(out.clients.filter((c) => /too many MQTT clients open in one run \(16\)/.test(c))).toHaveLength(20 - (MQTT_LIMITS.clients - 1));
    expect(r.bus.subs.size).toBe(0);
    const spread = await runService(`function svc(req, resp) {
      var ps = [];
      for (var i = 0; i < 3; i++) { var c = new MQTT.Client(), list = []; for (var j = 0; j < 100; j++) list.push("c" + i + "/" + j); ps.push(c.subscribe(list, function () {}).then(function () { return "ok"; }, function (e) { return e.message; })); }
      Promise.all(ps).then(function (all) { resp.success(all); });
    }`);
    expect(spread.value).toEqual(["ok", "ok", "too many topic subscriptions in one run (256)"]);
  });

  test("shared subscriptions: each message goes to one member of the group, in turn", async () => {
    const bus = new FakeBus();
    const code = `function svc(req, resp) {
      var c = new MQTT.Client(), got = [];
      c.subscribe("$share/workers/jobs/+", function (topic, m) { got.push(m.payload); if (m.payload === "stop") resp.success(got); })
        .then(function () { c.publish("joined", "1"); });
    }`;
    const runs = [runService(code, { bus }), runService(code, { bus })];
    await waitUntil(() => bus.published.filter((p) => p.topic === "joined").length === 2);
    // each client is a member of the broker's group
    expect(bus.filters()).toEqual(["$share/workers/jobs/+", "$share/workers/jobs/+"]);
    for (let i = 0; i < 6; i++) bus.send(SK, `jobs/${i}`, `j${i}`);
    bus.send(SK, "jobs/x", "stop");
    const [a] = await Promise.race([Promise.all([runs[0]!]), Promise.all([runs[1]!])]);
    const first = (a!.value as string[]).filter((v) => v !== "stop");
    bus.send(SK, "jobs/x", "stop");
    const both = await Promise.all(runs);
    const all = both.flatMap((b) => (b.value as string[]).filter((v) => v !== "stop")).sort();
    expect(all).toEqual(["j0", "j1", "j2", "j3", "j4", "j5"]);
    expect(first).toHaveLength(3);
    expect(bus.subs.size).toBe(0);
  });
});

// ---- the parts ---------------------------------------------------------------------------------

describe("RunMqtt", () => {
  const ownish = (sink: (ev: Omit<MqttEvent, "c">, bytes: number) => void) => {
    captured = sink;
    return { external: false, ready: Promise.resolve(), subscribe: async () => {}, unsubscribe: async () => {}, publish: async () => {}, close: async () => {} };
  };
  let captured: (ev: Omit<MqttEvent, "c">, bytes: number) => void = () => {};

  test("the queue keeps the newest events up to its bounds, counts what it drops, and answers in batches", async () => {
    let drops = 0;
    const r = new RunMqtt((n) => { drops += n; });
    r.open(1, ownish, false);
    await r.subscribe(1, ["q"]);
    for (let i = 0; i < MQTT_LIMITS.queue + 5; i++) captured(...messageEvent("q", Buffer.from(String(i)), 0));
    expect(r.dropped).toBe(5);
    expect(drops).toBe(5);
    const first = await r.next();
    expect(first).toHaveLength(MQTT_LIMITS.batch);
    expect(first[0]).toEqual({ c: 1, t: "q", p: "5", q: 0 });
    // bytes: a few large messages push the oldest out
    const big = Buffer.alloc(MQTT_LIMITS.queueBytes / 4, 0x61);
    const r2 = new RunMqtt();
    r2.open(1, ownish, false);
    await r2.subscribe(1, ["q"]);
    for (let i = 0; i < 6; i++) captured(...messageEvent("q", big, 0));
    expect(r2.dropped).toBe(3);
    captured({}, -1); // a payload too large
    expect(r2.dropped).toBe(4);
    const batch = await r2.next();
    expect(batch.length).toBe(1); // past batchBytes after one
  });

  test("next waits for an event, answers [] when nothing can come, and [] once closed", async () => {
    const r = new RunMqtt();
    expect(await r.next()).toEqual([]); // no subscription
    r.open(7, ownish, false);
    await r.subscribe(7, ["a"]);
    const waiting = r.next();
    captured(...messageEvent("a", Buffer.from([0xC3]), 1));
    expect(await waiting).toEqual([{ c: 7, t: "a", p: "\uFFFD", b: "\u00C3", q: 1 }]);
    const idle = r.next();
    await r.unsubscribe(7, ["a"]);
    expect(await idle).toEqual([]);
    await r.subscribe(7, ["b"]);
    const open = r.next();
    await r.close();
    expect(await open).toEqual([]);
    expect(await r.next()).toEqual([]);
  });
});

describe("validFilter", () => {
  test("filters, $share included", () => {
    for (const f of ["a", "a/+/b", "#", "a/#", "+", "$share/g/a/#", "$share/g/+"]) expect(validFilter(f)).toBe(true);
    for (const f of ["", "a/#/b", "a+", "a/b#", "$share/g", "$share//a", "$share/g+/a", "$share/g/", "a\u0000b", "x".repeat(1025)]) expect(validFilter(f)).toBe(false);
  });
});

// ---- an external broker (mosquitto) -------------------------------------------------------------------

const MOSQUITTO = ["/usr/sbin/mosquitto", "/usr/bin/mosquitto"].find((p) => spawnSync("test", ["-x", p]).status === 0);

async function freePort(): Promise<number> {
  return new Promise((res) => { const s = createServer(); s.listen(0, "127.0.0.1", () => { const p = (s.address() as { port: number }).port; s.close(() => res(p)); }); });
}

describe.skipIf(!MOSQUITTO)("MQTT.Client on an external broker (mosquitto)", () => {
  let proc: ChildProcess;
  let port = 0;
  let dir = "";
  const url = () => `mqtt://127.0.0.1:${port}`;
  beforeAll(async () => {
    port = await freePort();
    dir = mkdtempSync(join(tmpdir(), "mosq-"));
    chmodSync(dir, 0o777); // mosquitto started as root writes its log as the mosquitto user
    writeFileSync(join(dir, "m.conf"), `listener ${port} 127.0.0.1\nallow_anonymous true\npersistence false\nlog_dest file ${join(dir, "m.log")}\nlog_type all\n`);
    proc = spawn(MOSQUITTO!, ["-c", join(dir, "m.conf")], { stdio: "ignore" });
    for (let i = 0; i < 100; i++) {
      const ok = await new Promise<boolean>((res) => { const c = mqtt.connect(url(), { reconnectPeriod: 0, connectTimeout: 500 }); c.once("connect", () => { c.end(true); res(true); }); c.once("error", () => { c.end(true); res(false); }); c.once("close", () => res(false)); });
      if (ok) return;
      await Bun.sleep(50);
    }
    throw new Error("mosquitto did not start");
  });
  afterAll(() => { proc?.kill(); rmSync(dir, { recursive: true, force: true }); });

  test("refused by the egress check unless the address is allowed", async () => {
    const r = await runService(`function svc(req, resp) {
      var c = new MQTT.Client({ address: "127.0.0.1", port: ${port} });
      c.publish("t", "x").then(function () { resp.success("published"); }, function (e) { resp.success(e.message); });
    }`);
    expect(r.value).toMatch(/egress refused: 127\.0\.0\.1, a loopback address/);
  });

  test("subscribes, receives and publishes through its own connection; the connection ends with the run", async () => {
    const watcher = await mqtt.connectAsync(url(), { reconnectPeriod: 0 });
    const seen: [string, string][] = [];
    watcher.on("message", (t, p) => seen.push([t, p.toString("latin1")]));
    await watcher.subscribeAsync("ext/out/#");
    const r = await runService(`function svc(req, resp) {
      var c = new MQTT.Client({ address: "127.0.0.1", port: ${port}, client_id: "svc-ext", keepalive: 10 }), got = {}, acked = 0;
      c.subscribe("ext/in/+", function (topic, m) {
        got[topic] = [m.qos, m.retain, m.duplicate];
        c.publish("ext/out/" + topic.split("/")[2], m.payload_bytes, 1).then(function () { if (++acked === 3) resp.success(got); });
      }).then(function () { return c.publish("ext/out/ready", "ready"); });
    }`, {
      egressAllow: ["127.0.0.1"],
      onStart: () => {
        void waitUntil(() => seen.some(([t]) => t === "ext/out/ready")).then(async () => {
          await watcher.publishAsync("ext/in/a", "one", { qos: 1 });
          await watcher.publishAsync("ext/in/b", Buffer.from([0xFF, 0x01]), { qos: 1 });
          await watcher.publishAsync("ext/in/c", "three", { qos: 0 });
        });
      },
    });
    expect(r.value).toEqual({ "ext/in/a": [1, false, false], "ext/in/b": [1, false, false], "ext/in/c": [0, false, false] });
    await waitUntil(() => seen.length >= 4);
    expect(seen).toEqual([["ext/out/ready", "ready"], ["ext/out/a", "one"], ["ext/out/b", "\u00FF\u0001"], ["ext/out/c", "three"]]);
    // the service's connection was closed by the run's end (mosquitto logs it)
    const log = () => readFileSync(join(dir, "m.log"), "utf8");
    await waitUntil(() => /Client svc-ext (disconnected|closed its connection)/.test(log()), 5_000);
    expect(log()).toMatch(/New client connected .* as svc-ext .*k10/);
    await watcher.endAsync();
  });

  test("a broker that does not answer, and one that refuses, reject the client's calls within the bound", async () => {
    const closed = await freePort();
    const t0 = Date.now();
    const r = await runService(`function svc(req, resp) {
      new MQTT.Client({ address: "127.0.0.1", port: ${closed} }).publish("t", "x").then(function () { resp.success("published"); }, function (e) { resp.success(e.message); });
    }`, { egressAllow: ["127.0.0.1"] });
    expect(r.value).toMatch(/could not connect to the MQTT broker at 127\.0\.0\.1:\d+/);
    expect(Date.now() - t0).toBeLessThan(MQTT_LIMITS.connectMs);
    // an external client counts against its own bound
    const many = await runService(`function svc(req, resp) {
      var all = [];
      for (var i = 0; i < 6; i++) all.push(new MQTT.Client({ address: "127.0.0.1", port: ${port} }).publish("t", "x").then(function () { return "ok"; }, function (e) { return e.message; }));
      Promise.all(all).then(function (a) { resp.success(a); });
    }`, { egressAllow: ["127.0.0.1"] });
    const out = many.value as string[];
    expect(out.filter((x) => x === "ok")).toHaveLength(MQTT_LIMITS.external);
    expect(out.filter((x) => /too many connections to external MQTT brokers/.test(x))).toHaveLength(6 - MQTT_LIMITS.external);
  });

  test("externalConn on its own: a lost connection is an event, and it comes back", async () => {
    const events: Omit<MqttEvent, "c">[] = [];
    const conn = externalConn({ host: "127.0.0.1", port, clientId: "dup-id", keepalive: 5 }, async (h) => h)((ev) => events.push(ev));
    await conn.ready;
    await conn.subscribe("dup/#");
    // another client with the same id takes over the session: ours is disconnected, then reconnects
    const thief = await mqtt.connectAsync(url(), { clientId: "dup-id", reconnectPeriod: 0 });
    await waitUntil(() => events.some((e) => e.k === "disconnect"));
    await thief.endAsync();
    await waitUntil(() => events.some((e) => e.k === "connect"), 8_000);
    await conn.close();
  });
});
