// Messaging: REST publish into the broker, message history
// written in batches with per-topic limits, topic listings.
import { Port } from "../core/port.ts";
import { LEVEL } from "../auth/permissions.ts";
import type { Principal } from "../auth/principal.ts";
import { principalId } from "../auth/principal.ts";
import { fail } from "../core/errors.ts";
import { parseQuery } from "../core/query.ts";
import { knownFields, objectBody } from "../core/validate.ts";
import { type Message, type PageMeta, type StorageRow, type StoredMessage, decodePage, messageAt, messagesRepo, scanPage } from "../store/messages.ts";
import type { Executor } from "../store/db.ts";
import type { DomainDeps } from "./deps.ts";
import type { Systems } from "./systems.ts";

const PUBLISH_FIELDS = new Set(["topic", "body", "payload", "qos", "retain"]);

/** Hands an in-process subscriber a message: its topic in the system's own form, its payload, and
 *  the QoS it was published with. */
export type Deliver = (topic: string, payload: Buffer, qos: number) => void;

/** What the broker offers the messaging API. */
export interface Broker {
  /** Publishes as `origin` (permissions already checked). */
  publish(systemKey: string, topic: string, payload: Buffer, qos: 0 | 1 | 2, retain: boolean, origin: Principal | null): Promise<void>;
  /** An in-process subscription to a topic filter of a system (permissions already checked);
   *  resolves, once it is active, to the function that ends it. */
  subscribe(systemKey: string, filter: string, deliver: Deliver): Promise<() => Promise<void>>;
  /** topic filter -> number of live subscriptions, for one system */
  subscriptions(systemKey: string): Map<string, number>;
}

const FLUSH_MS = 100;
const FLUSH_ROWS = 5_000;
/** When the buffer is this full the broker's history lags: drop the oldest rather than grow. */
const BUFFER_MAX = 100_000;
const SWEEP_MS = 60_000;

interface Limits { maxRows: number; maxTime: number; store: boolean }
/** A message of a page found by a read, decoded only if it is returned. */
interface Found { time: number; page: number; index: number; at: number; data: Uint8Array }
const newerFirst = (a: Found, b: Found) => b.time - a.time || b.page - a.page || b.index - a.index;
/** Up to this many wanted, a read keeps them sorted as it goes; more are sorted at the end. */
const SORTED_MAX = 100;

/** The newest `cap` messages offered (all when cap is 0), newest first. */
class Newest {
  private list: Found[] = [];
  /** no message older than this can be among the newest any more */
  floor = -Infinity;
  constructor(private readonly cap: number) {}

  offer(f: Found) {
    const { cap, list } = this;
    if (cap > 0 && cap <= SORTED_MAX) {
      if (list.length === cap) {
        if (newerFirst(f, list[cap - 1]!) >= 0) return;
        list.pop();
      }
      let i = list.length;
      while (i > 0 && newerFirst(f, list[i - 1]!) < 0) i--;
      list.splice(i, 0, f);
      if (list.length === cap) this.floor = list[cap - 1]!.time;
      return;
    }
    list.push(f);
    if (cap > 0 && list.length >= 2 * cap) {
      this.list = list.sort(newerFirst).slice(0, cap);
      this.floor = this.list[cap - 1]!.time;
    }
  }

  take(): Found[] {
    if (this.cap > 0 && this.cap <= SORTED_MAX) return this.list;
    this.list.sort(newerFirst);
    return this.cap > 0 ? this.list.slice(0, this.cap) : this.list;
  }
}

/** Pages a history read looks at first (the newest few usually hold the last few messages), then at a time. */
const PAGES_FIRST = 4;
const PAGES_MORE = 32;
interface Pending extends Message { systemKey: string; topic: string }

const STORAGE_FIELDS = new Set(["topic", "max_rows", "max_time", "edge", "platform", "system_key"]);

/** Which stored messages a history read or delete takes, as the caller gave them (checked after
 *  the caller's rights): `topic` (exact), `count` (0 = all), `last` (before this epoch second),
 *  `start`/`stop` (a window in epoch seconds, -1 = open). */
export interface HistoryParams { topic?: string | null; count?: string | null; last?: string | null; start?: string | null; stop?: string | null }

export class Messages {
  private buffer: Pending[] = [];
  private flushing: Promise<void> | null = null;
  /** a flush was asked for because the buffer is full and has not started yet */
  private flushAsked = false;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private sweeper: ReturnType<typeof setInterval> | null = null;
  /** per system/topic settings; absent = defaults */
  private settings = new Map<string, StorageRow>();
  /** rows per topic since the last trim, to trim without counting every time */
  private sinceTrim = new Map<string, number>();
  dropped = 0;

  /** `brokerPort`: the MQTT broker, attached once it runs (it is built after the domain) */
  constructor(private readonly d: DomainDeps, private readonly systems: Systems, private readonly brokerPort = new Port<Broker>("broker")) {}

  private get broker(): Broker | null { return this.brokerPort.get(); }

  async start() {
    for (const s of await messagesRepo.allStorage(this.d.db)) this.settings.set(`${s.system_key}\u0000${s.topic}`, s);
    this.sweeper = setInterval(() => this.sweep().catch((err) => this.d.log.warn("history sweep failed", { err })), SWEEP_MS);
    this.sweeper.unref();
  }

  async stop() {
    if (this.sweeper) clearInterval(this.sweeper);
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.flush();
  }

  private readonly defaults = (): Limits => ({ maxRows: this.d.config.historyMaxRows, maxTime: this.d.config.historyMaxAge * 1000, store: this.d.config.historyMaxRows !== 0 });
  private defaultLimits: Limits | undefined;

  private limits(systemKey: string, topic: string): Limits {
    if (this.settings.size === 0) return (this.defaultLimits ??= this.defaults());
    const s = this.settings.get(`${systemKey}\u0000${topic}`);
    const here = this.d.config.mode === "edge" ? s?.edge : s?.platform;
    return {
      maxRows: s ? s.max_rows : this.d.config.historyMaxRows,
      maxTime: (s && s.max_time > 0 ? s.max_time : this.d.config.historyMaxAge) * 1000,
      store: s ? s.max_rows !== 0 && here !== 0 : this.d.config.historyMaxRows !== 0,
    };
  }

  /** Called by the broker for every publish: queued, written in the next batch. */
  record(systemKey: string, topic: string, payload: Uint8Array, userid: string, ip: string, qos: number) {
    if (!this.limits(systemKey, topic).store) return;
    if (this.buffer.length >= BUFFER_MAX) { this.buffer.shift(); this.dropped++; }
    this.buffer.push({ systemKey, topic, payload, time: Date.now(), userid, ip, qos });
    // one flush at a time is asked for: while one writes, the next batch simply grows
    if (this.buffer.length >= FLUSH_ROWS) { if (!this.flushAsked) { this.flushAsked = true; void this.flush(); } }
    else this.timer ??= setTimeout(() => { this.timer = null; void this.flush(); }, FLUSH_MS);
  }

  /** Writes the buffered messages in one transaction, a page per topic, and trims topics over their limit. */
  async flush(): Promise<void> {
    if (this.flushing) await this.flushing;
    this.flushAsked = false;
    if (!this.buffer.length) return;
    const batch = this.buffer;
    this.buffer = [];
    this.flushing = (async () => {
      try {
        const byTopic = new Map<string, Pending[]>();
        let last: Pending | undefined;
        let list: Pending[] = [];
        for (const m of batch) {
          // a busy topic arrives in runs: the key is only built when the topic changes
          if (last === undefined || m.topic !== last.topic || m.systemKey !== last.systemKey) {
            const k = `${m.systemKey}\u0000${m.topic}`;
            const known = byTopic.get(k);
            if (known) list = known; else byTopic.set(k, (list = []));
          }
          list.push(m);
          last = m;
        }
        await this.d.db.tx(async (tx) => {
          for (const [k, msgs] of byTopic) {
            const { systemKey, topic } = msgs[0]!;
            await messagesRepo.insertPages(tx, systemKey, topic, msgs);
            const { maxRows } = this.limits(systemKey, topic);
            if (maxRows <= 0) continue;
            const seen = this.sinceTrim.get(k) ?? (await messagesRepo.countTopic(tx, systemKey, topic)) - msgs.length;
            // trim once a topic is well over its limit, so most batches do not trim at all
            if (seen + msgs.length > maxRows * 1.1 + 10) this.sinceTrim.set(k, await this.trim(tx, systemKey, topic, maxRows, false));
            else this.sinceTrim.set(k, seen + msgs.length);
          }
        });
      } catch (err) {
        this.d.log.error("history write failed", { err, messages: batch.length });
      }
    })();
    await this.flushing;
    this.flushing = null;
  }

  /** Keeps the newest `keep` messages of a topic by dropping whole old pages; `exact` also cuts
   *  the oldest kept page (the periodic sweep), otherwise up to one page more stays on disk and
   *  reads still return at most `keep`. Returns how many messages remain. */
  private async trim(ex: Executor, systemKey: string, topic: string, keep: number, exact = true): Promise<number> {
    const pages = await messagesRepo.oldestPages(ex, systemKey, topic);
    let total = pages.reduce((n, p) => n + p.count, 0);
    for (const p of pages) {
      if (total <= keep) break;
      const excess = total - keep;
      if (p.count <= excess) { await messagesRepo.deletePage(ex, p.id); total -= p.count; continue; }
      if (exact) {
        const page = (await messagesRepo.page(ex, p.id))!;
        await messagesRepo.rewritePage(ex, p.id, decodePage(p.id, page.data).slice(excess));
        total -= excess;
      }
      break;
    }
    return total;
  }

  /** Age limits and exact row limits, periodically. */
  async sweep() {
    await this.flush();
    const now = Date.now();
    await this.d.db.tx(async (tx) => {
      const cutoff = now - this.d.config.historyMaxAge * 1000;
      await messagesRepo.deletePagesBefore(tx, cutoff);
      for (const p of await messagesRepo.pagesStraddling(tx, cutoff))
        await messagesRepo.rewritePage(tx, p.id, decodePage(p.id, p.data).filter((m) => m.time >= cutoff));
      for (const st of this.settings.values()) {
        if (st.max_time > 0) await messagesRepo.deleteTopicPagesBefore(tx, st.system_key, st.topic, now - st.max_time * 1000);
        if (st.max_rows > 0) await this.trim(tx, st.system_key, st.topic, st.max_rows);
      }
      for (const [k, n] of this.sinceTrim) {
        const [systemKey, topic] = k.split("\u0000") as [string, string];
        const { maxRows } = this.limits(systemKey, topic);
        if (maxRows > 0 && n > maxRows) await this.trim(tx, systemKey, topic, maxRows);
      }
    });
    this.sinceTrim.clear();
  }

  /** Messages of a topic in [after, before], newest first, at most `limit` (0 = all). Pages are
   *  read newest first, a few at a time, until no unread page can hold a message newer than the
   *  limit-th one found: the last 10 of a topic cost the same at any length of its history. Only
   *  the messages returned are decoded. */
  private async select(ex: Executor, systemKey: string, topic: string, after: number | null, before: number | null, limit: number): Promise<StoredMessage[]> {
    // up to a page beyond the topic's limit may still be on disk until the next sweep
    const { maxRows } = this.limits(systemKey, topic);
    const newest = new Newest(maxRows > 0 ? (limit > 0 ? Math.min(limit, maxRows) : maxRows) : limit);
    let from: PageMeta | null = null;
    reading: for (let batch = PAGES_FIRST; ; batch = PAGES_MORE) {
      const pages = await messagesRepo.pages(ex, systemKey, topic, after, before, from, batch);
      for (const page of pages) {
        // pages come by last time: one older than every message still wanted holds none of them
        if (page.last_time < newest.floor) break reading;
        const data = await messagesRepo.pageData(ex, page.id);
        if (!data) continue;
        let index = 0;
        scanPage(data, (time, at) => {
          if ((after === null || time >= after) && (before === null || time <= before)) newest.offer({ time, page: page.id, index, at, data });
          index++;
        });
      }
      if (pages.length < batch) break;
      from = pages[pages.length - 1]!;
    }
    return newest.take().map((f) => messageAt(f.page, f.data, f.at, f.index));
  }

  // ---- REST -----------------------------------------------------------------------------------

  private async needHistory(p: Principal, systemKey: string, level: number) {
    await this.systems.access(p, systemKey);
    await this.d.perms.require(p, { kind: "msgHistory" }, level, "message history");
  }

  private static toWire(topic: string) {
    return (m: StoredMessage) => {
      const payload = Buffer.from(m.payload);
      return {
        pk: `${m.page}-${m.index}`, topicid: topic, ip: m.ip, time: Math.floor(m.time / 1000), payloadsize: payload.length,
        payload: payload.toString("utf8"), userid: m.userid, qos: m.qos,
      };
    };
  }

  /** `topic` (exact, no wildcards), `count` (0 = all), `last` (before this epoch second), `start`/`stop`. */
  private params(q: HistoryParams) {
    const topic = q.topic;
    if (!topic) throw fail("INVALID_ARGUMENT", "topic is required");
    if (/[+#]/.test(topic)) throw fail("INVALID_ARGUMENT", "topic must be one topic: wildcards are not honoured here");
    const num = (name: Exclude<keyof HistoryParams, "topic">, required = false): number | null => {
      const v = q[name];
      if (v === null || v === undefined || v === "") { if (required) throw fail("INVALID_ARGUMENT", `${name} is required`); return null; }
      const n = Number(v);
      if (!Number.isFinite(n)) throw fail("INVALID_ARGUMENT", `${name} must be a number`);
      return n;
    };
    const count = num("count", true)!;
    if (count < 0 || !Number.isSafeInteger(count)) throw fail("INVALID_ARGUMENT", "count must be 0 (all) or a positive integer");
    const last = num("last"), start = num("start"), stop = num("stop");
    // (0, as -1, leaves a bound out: ClearBlade's clients send last=0 for "now", its server
    // reading an unset number as 0)
    const ms = (s: number | null) => (s === null || s <= 0 ? null : s * 1000);
    // "last" is the point in time to read back from; start/stop bound a window (-1 or 0 = unused).
    // Times on the wire are whole seconds: a bound's second is included entirely.
    let before = stop === null || stop <= 0 ? null : stop * 1000 + 999;
    const lastMs = ms(last);
    if (lastMs !== null) before = before === null ? lastMs : Math.min(before, lastMs);
    return { topic, count, after: ms(start), before };
  }

  async history(p: Principal, systemKey: string, q: HistoryParams) {
    await this.needHistory(p, systemKey, LEVEL.READ);
    const { topic, count, after, before } = this.params(q);
    await this.flush();
    return (await this.select(this.d.db, systemKey, topic, after, before, count)).map(Messages.toWire(topic));
  }

  async deleteHistory(p: Principal, systemKey: string, q: HistoryParams) {
    await this.needHistory(p, systemKey, LEVEL.DELETE);
    const { topic, count, after, before } = this.params(q);
    await this.flush();
    const gone = await this.d.db.tx(async (tx) => {
      const victims = await this.select(tx, systemKey, topic, after, before, count);
      const byPage = new Map<number, Set<number>>();
      for (const m of victims) (byPage.get(m.page) ?? byPage.set(m.page, new Set()).get(m.page)!).add(m.index);
      for (const [id, drop] of byPage) {
        const page = (await messagesRepo.page(tx, id))!;
        await messagesRepo.rewritePage(tx, id, decodePage(id, page.data).filter((m) => !drop.has(m.index)));
      }
      return victims;
    });
    this.sinceTrim.delete(`${systemKey}\u0000${topic}`);
    return gone.map(Messages.toWire(topic));
  }

  /** POST publish: `{topic, body|payload, qos}`; needs publish permission on the topic. A code
   *  service's MQTT.Client may give the body as bytes. */
  async publish(p: Principal, systemKey: string, body: unknown) {
    await this.systems.access(p, systemKey);
    const b = objectBody(body);
    knownFields(b, PUBLISH_FIELDS);
    const topic = b.topic;
    if (typeof topic !== "string" || !topic || /[+#]/.test(topic) || topic.length > 1024) throw fail("INVALID_ARGUMENT", "topic must be a topic name without wildcards");
    const raw = b.body !== undefined ? b.body : b.payload;
    if (raw === undefined) throw fail("INVALID_ARGUMENT", "body (or payload) is required");
    const payload = raw instanceof Uint8Array ? Buffer.from(raw) : Buffer.from(typeof raw === "string" ? raw : JSON.stringify(raw));
    const qos = b.qos === undefined ? 0 : b.qos;
    if (qos !== 0 && qos !== 1 && qos !== 2) throw fail("INVALID_ARGUMENT", "qos must be 0, 1 or 2");
    if (b.retain !== undefined && typeof b.retain !== "boolean") throw fail("INVALID_ARGUMENT", "retain must be a boolean");
    await this.d.perms.require(p, { kind: "topic", name: topic }, LEVEL.CREATE, `publish to topic '${topic}'`);
    if (!this.broker) throw fail("INTERNAL", "the broker is not running");
    await this.broker.publish(systemKey, topic, payload, qos, b.retain === true, p);
    return {};
  }

  /** A subscription for a code service's run; needs subscribe (read) permission on the filter. */
  async subscribe(p: Principal, systemKey: string, filter: unknown, deliver: Deliver): Promise<() => Promise<void>> {
    await this.systems.access(p, systemKey);
    if (typeof filter !== "string" || !filter || filter.length > 1024 || !validFilter(filter)) throw fail("INVALID_ARGUMENT", "topic must be a topic filter ('+' for one level, '#' last for the rest)");
    // a shared subscription ($share/<group>/<filter>) needs the right to subscribe to its filter
    const share = /^\$share\/([^/+#]+)\/(.+)$/.exec(filter);
    if (filter.startsWith("$share/") && !share) throw fail("INVALID_ARGUMENT", "a shared subscription is $share/<group>/<filter>, the group without wildcards");
    const name = share ? share[2]! : filter;
    await this.d.perms.require(p, { kind: "topic", name }, LEVEL.READ, `subscribe to topic '${name}'`);
    if (!this.broker) throw fail("INTERNAL", "the broker is not running");
    // a `$share/` filter joins the broker's group (src/broker/shared.ts)
    return this.broker.subscribe(systemKey, filter, deliver);
  }

  /** Topics with history, with the query object's structure (src/core/query.ts; developer). */
  async topics(p: Principal, systemKey: string, query: string | null) {
    await this.systems.accessAsDeveloper(p, systemKey);
    await this.flush();
    const q = parseQuery(query ?? undefined, { defaultPageSize: 0 });
    const rows = await messagesRepo.topics(this.d.db, systemKey, q);
    const live = this.broker?.subscriptions(systemKey) ?? new Map<string, number>();
    return rows.map((r) => ({
      topicid: r.topicid, message_count: r.message_count, last_published: Math.floor(r.last_time / 1000),
      concurrency: live.get(r.topicid) ?? 0, system_key: systemKey,
    }));
  }

  async topicCount(p: Principal, systemKey: string, query: string | null) {
    await this.systems.accessAsDeveloper(p, systemKey);
    await this.flush();
    const q = parseQuery(query ?? undefined);
    return { count: await messagesRepo.topicCount(this.d.db, systemKey, q.filters) };
  }

  /** Topics with live subscriptions. */
  async currentTopics(p: Principal, systemKey: string) {
    await this.systems.access(p, systemKey);
    return [...(this.broker?.subscriptions(systemKey).keys() ?? [])].sort();
  }

  async storage(p: Principal, systemKey: string) {
    await this.systems.accessAsDeveloper(p, systemKey);
    return (await messagesRepo.storage(this.d.db, systemKey)).map((s) => ({
      topic: s.topic, max_rows: s.max_rows, max_time: s.max_time, edge: s.edge === 1, platform: s.platform === 1, system_key: systemKey,
    }));
  }

  /** PUT storage: `[{topic, max_rows, max_time, edge, platform}]` (max_rows 0 = no history for the topic). */
  async putStorage(p: Principal, systemKey: string, body: unknown) {
    await this.systems.accessAsDeveloper(p, systemKey);
    if (!Array.isArray(body)) throw fail("INVALID_ARGUMENT", "body must be an array of {topic, max_rows, max_time, edge, platform}");
    const rows: StorageRow[] = body.map((e, i) => {
      const o = knownFields(objectBody(e, `[${i}]`), STORAGE_FIELDS, `[${i}]`);
      const int = (v: unknown, n: string) => { if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) throw fail("INVALID_ARGUMENT", `[${i}].${n} must be a whole number >= 0`); return v; };
      if (typeof o.topic !== "string" || !o.topic || /[+#]/.test(o.topic)) throw fail("INVALID_ARGUMENT", `[${i}].topic must be a topic name`);
      for (const k of ["edge", "platform"]) if (o[k] !== undefined && typeof o[k] !== "boolean") throw fail("INVALID_ARGUMENT", `[${i}].${k} must be a boolean`);
      return {
        system_key: systemKey, topic: o.topic, max_rows: int(o.max_rows, "max_rows"), max_time: int(o.max_time ?? 0, "max_time"),
        edge: o.edge === false ? 0 : 1, platform: o.platform === false ? 0 : 1,
      };
    });
    await this.d.db.tx(async (tx) => { for (const r of rows) await messagesRepo.putStorage(tx, r); });
    for (const r of rows) this.settings.set(`${systemKey}\u0000${r.topic}`, r);
    return this.storage(p, systemKey);
  }

  /** Origin fields of a publish for the history row. */
  static originOf(p: Principal | null): string { return p ? principalId(p) : ""; }
}

/** An MQTT topic filter: '+' alone in its level, '#' alone and last. */
function validFilter(filter: string): boolean {
  const levels = filter.split("/");
  return levels.every((l, i) => (l.includes("+") ? l === "+" : true) && (l.includes("#") ? l === "#" && i === levels.length - 1 : true));
}
