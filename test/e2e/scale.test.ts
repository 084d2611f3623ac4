// Behaviour behind the flat cost curves (bench/scale.ts), black-box: the QoS a client receives
// with overlapping subscriptions (the highest of the matching ones, MQTT 3.1.1 §3.3.5), bulk
// device creation (an array body, refused whole for one bad entry), device sign-in with every kind
// of stored key (also across a restart), history reads bounded by `count`, and paging: totals,
// continuation through NEXTPAGEURL, deep pages.
import mqtt from "mqtt";
import type { IPublishPacket, MqttClient } from "mqtt";
import t from "tap";
import { type DevSystem, type HttpResponse, devWithSystem, isErr, ok200, qs, request, startOutpost, uniq, waitFor } from "./harness.ts";

const o = await startOutpost();
t.teardown(() => o.stop());
const s = await devWithSystem(o, "scale");

// ---- MQTT helpers -----------------------------------------------------------------------------

const clients = new Set<MqttClient>();
t.teardown(() => { for (const c of clients) c.end(true); });

function connect(sys: DevSystem): Promise<MqttClient> {
  return new Promise((res, rej) => {
    const c = mqtt.connect(`mqtt://127.0.0.1:${o.mqttPort}`, { reconnectPeriod: 0, connectTimeout: 10_000, clientId: uniq("cid"), protocolVersion: 4, username: sys.devToken, password: sys.systemKey });
    clients.add(c);
    c.once("connect", () => res(c));
    c.once("error", rej);
  });
}

interface Got { topic: string; qos: number; text: string }
function collect(c: MqttClient): Got[] {
  const got: Got[] = [];
  c.on("message", (topic, payload, packet: IPublishPacket) => got.push({ topic, qos: packet.qos, text: payload.toString("utf8") }));
  return got;
}

/** One SUBSCRIBE per filter, in this order (the order aedes adds their handlers in). */
async function subscribe(c: MqttClient, subs: [string, 0 | 1 | 2][]) {
  for (const [topic, qos] of subs) {
    const granted = await c.subscribeAsync(topic, { qos });
    if (granted[0]?.qos !== qos) throw new Error(`SUBSCRIBE ${topic} at ${qos}: granted ${JSON.stringify(granted)}`);
  }
}

/** Publishes each [topic, qos] with a unique payload; resolves to what `got` received of each
 *  (waiting for all of them), or undefined for one that did not arrive. */
async function deliveries(pub: MqttClient, got: Got[], sends: [string, 0 | 1 | 2][]): Promise<(Got[] | undefined)[]> {
  const texts = sends.map(() => uniq("m"));
  for (const [i, [topic, qos]] of sends.entries()) await pub.publishAsync(topic, texts[i]!, { qos });
  await waitFor(() => texts.every((x) => got.some((g) => g.text === x)), 5_000);
  // a duplicate would arrive right behind the first copy
  await new Promise((r) => setTimeout(r, 150));
  return texts.map((x) => { const all = got.filter((g) => g.text === x); return all.length ? all : undefined; });
}

t.test("QoS with overlapping subscriptions: the highest matching one, once", async (t) => {
  const pub = await connect(s);
  // a wildcard at QoS 0 and an exact filter at QoS 1 (added in both orders), wildcards of each kind
  for (const order of ["wildcard first", "exact first"]) {
    const p = uniq("ov");
    const sub = await connect(s);
    const got = collect(sub);
    const subs: [string, 0 | 1 | 2][] = [[`${p}/#`, 0], [`${p}/a`, 1]];
    await subscribe(sub, order === "wildcard first" ? subs : subs.reverse());
    const [a1, b1, a2, a0] = await deliveries(pub, got, [[`${p}/a`, 1], [`${p}/b`, 1], [`${p}/a`, 2], [`${p}/a`, 0]]);
    t.same(a1?.map((g) => g.qos), [1], `${order}: QoS 1 publish on the exact topic arrives once at QoS 1`);
    t.same(b1?.map((g) => g.qos), [0], `${order}: on a topic only the QoS 0 wildcard matches, QoS 0`);
    t.same(a2?.map((g) => g.qos), [1], `${order}: a QoS 2 publish is capped at the best grant (1)`);
    t.same(a0?.map((g) => g.qos), [0], `${order}: a QoS 0 publish stays QoS 0`);
    sub.end(true);
  }

  const p = uniq("ov");
  const sub = await connect(s);
  const got = collect(sub);
  await subscribe(sub, [[`${p}/#`, 0], [`${p}/+/x`, 1], [`${p}/a/x`, 2], [`${p}/a/#`, 0]]);
  const [ax, bx, by] = await deliveries(pub, got, [[`${p}/a/x`, 2], [`${p}/b/x`, 2], [`${p}/b/y`, 2]]);
  t.same(ax?.map((g) => g.qos), [2], "four filters match: QoS 2 from the exact one");
  t.same(bx?.map((g) => g.qos), [1], "'+' at QoS 1 beats '#' at QoS 0");
  t.same(by?.map((g) => g.qos), [0], "only '#' at QoS 0 matches");

  // the grants follow UNSUBSCRIBE and a SUBSCRIBE again at another QoS
  await sub.unsubscribeAsync(`${p}/a/x`);
  const [ax2] = await deliveries(pub, got, [[`${p}/a/x`, 2]]);
  t.same(ax2?.map((g) => g.qos), [1], "after UNSUBSCRIBE of the QoS 2 filter: QoS 1 from '+'");
  await subscribe(sub, [[`${p}/+/x`, 0]]);
  const [ax3] = await deliveries(pub, got, [[`${p}/a/x`, 2]]);
  t.same(ax3?.map((g) => g.qos), [0], "'+' subscribed again at QoS 0: QoS 0");
  await subscribe(sub, [[`${p}/#`, 2]]);
  const [ax4] = await deliveries(pub, got, [[`${p}/a/x`, 1]]);
  t.same(ax4?.map((g) => g.qos), [1], "'#' subscribed again at QoS 2: a QoS 1 publish arrives at QoS 1");

  // many subscriptions on the receiver do not change which grant applies
  const q = uniq("many");
  const many = await connect(s);
  const gotMany = collect(many);
  const filters = Array.from({ length: 2000 }, (_, i) => `${q}/f${i}`);
  for (let i = 0; i < filters.length; i += 500) await many.subscribeAsync(Object.fromEntries(filters.slice(i, i + 500).map((f) => [f, { qos: 0 as const }])));
  await subscribe(many, [[`${q}/+`, 1]]);
  const [f7, other] = await deliveries(pub, gotMany, [[`${q}/f7`, 1], [`${q}/zz`, 1]]);
  t.same(f7?.map((g) => g.qos), [1], "2,000 QoS 0 filters and a QoS 1 '+': QoS 1");
  t.same(other?.map((g) => g.qos), [1], "a topic only '+' matches: QoS 1");
  many.end(true);
  sub.end(true);
  pub.end(true);
});
