// Messaging: ClearBlade.Messaging (publish, subscribe, waitForMessage) and ClearBladeAsync.Messaging.
import { LEVEL } from "../../auth/permissions.ts";
import { fail } from "../../core/errors.ts";
import { parseQuery, type Query } from "../../core/query.ts";
import type { HistoryParams } from "../../domain/messages.ts";
import { RunInbox } from "../inbox.ts";
import type { MessageTimerKind } from "../messageTimers.ts";
import type { HostContext, LibraryArea } from "./types.ts";

/** A history bound as the domain takes it (the REST query-string form): a number, or none. */
function bound(v: unknown, what: string): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== "number" || !Number.isFinite(v)) throw fail("INVALID_ARGUMENT", `${what} must be a number (epoch seconds) or null`);
  return String(v);
}
function historyParams(a: Record<string, any>): HistoryParams {
  if (typeof a.topic !== "string" || !a.topic || a.topic.length > 1024) throw fail("INVALID_ARGUMENT", "a topic is required");
  const count = a.count === undefined || a.count === null ? 0 : a.count;
  if (typeof count !== "number" && typeof count !== "string") throw fail("INVALID_ARGUMENT", "count must be a number (0: all)");
  return { topic: a.topic, count: String(count), last: bound(a.last, "last"), start: bound(a.start, "start"), stop: bound(a.stop, "stop") };
}

/** MessageHistory().read's query as a history read: a topicid EQ (required), time bounds
 *  (GT, GTE, LT, LTE in epoch seconds) and PAGESIZE (100 when absent). */
function historyOfQuery(q: Query): HistoryParams {
  if (q.filters.length !== 1) throw fail("BAD_QUERY", "MessageHistory().read needs one filter group naming the topic: equalTo('topicid', topic)");
  let topic: string | null = null, start: number | null = null, stop: number | null = null;
  for (const c of q.filters[0]!) {
    if (c.field === "topicid" && c.op === "EQ" && typeof c.value === "string") topic = c.value;
    else if (c.field === "time" && typeof c.value === "number" && ["GT", "GTE", "LT", "LTE"].includes(c.op)) {
      if (c.op === "GT" || c.op === "GTE") start = Math.max(start ?? -Infinity, c.op === "GT" ? Math.floor(c.value) + 1 : Math.ceil(c.value));
      else stop = Math.min(stop ?? Infinity, c.op === "LT" ? Math.ceil(c.value) - 1 : Math.floor(c.value));
    } else throw fail("BAD_QUERY", `MessageHistory().read filters on topicid (EQ) and time (GT, GTE, LT, LTE) only, not ${c.op} on '${c.field}'`);
  }
  if (topic === null) throw fail("BAD_QUERY", "MessageHistory().read needs equalTo('topicid', topic)");
  if (q.sort.some((s) => s.field !== "time" || !s.desc)) throw fail("BAD_QUERY", "message history comes newest first (sort: descending('time') only)");
  const count = q.pageSize === 0 && q.pageNum === 0 ? 0 : q.pageSize;
  if (q.pageNum > 1) throw fail("BAD_QUERY", "MessageHistory().read gives the first page only (narrow the time instead)");
  return { topic, count: String(count), last: null, start: start === null ? null : String(start), stop: stop === null ? null : String(stop) };
}

/** A row of the classic history calls (getMessageHistory, getMessageHistoryWithTimeFrame): the
 *  REST row with ClearBlade's names for its payload and time beside it. ClearBlade's services read
 *  `message` and `send-date` there, and tell these rows from getAndDeleteMessageHistory's (which
 *  have payload and time only) by whether `message` is in them. */
const classicRow = <R extends { payload: string; time: number }>(r: R) => ({ message: r.payload, "send-date": r.time, ...r });

const timerKind = (v: unknown): MessageTimerKind => (v === "interval" ? "interval" : "timeout");

/** The run's subscriptions: they end with the run. */
const inboxOf = (x: HostContext) =>
  x.run.resource("inbox", () => {
    const inbox = new RunInbox((filter, deliver) => x.e.messages.subscribe(x.p, x.systemKey, filter, deliver));
    return { value: inbox, close: () => inbox.close() };
  });

export const messaging: LibraryArea = {
  ops: {
    "messaging.publish": (x, a) => {
      if (typeof a.topic !== "string") throw fail("INVALID_ARGUMENT", "a topic is required");
      return x.e.messages.publish(x.p, x.systemKey, { topic: a.topic, body: a.payload ?? "", qos: a.qos ?? 0 });
    },
    "messaging.subscribe": async (x, a) => { await inboxOf(x).subscribe(a.topic); return null; },
    "messaging.unsubscribe": async (x, a) => {
      if (typeof a.topic !== "string") throw fail("INVALID_ARGUMENT", "a topic is required");
      await x.run.peek<RunInbox>("inbox")?.unsubscribe(a.topic);
      return null;
    },
    "messaging.next": (x, a) => {
      const inbox = x.run.peek<RunInbox>("inbox");
      if (!inbox?.subscribed) throw fail("INVALID_ARGUMENT", "waitForMessage needs a subscription first (Messaging().subscribe)");
      const topics = a.topics === undefined || a.topics === null ? null : Array.isArray(a.topics) ? a.topics : [a.topics];
      if (topics && !topics.every((t: unknown) => typeof t === "string")) throw fail("INVALID_ARGUMENT", "topics must be topic filters");
      return inbox.next(topics);
    },
    "messaging.history": async (x, a) => (await x.e.messages.history(x.p, x.systemKey, historyParams(a))).map(classicRow),
    "messaging.takeHistory": (x, a) => x.e.messages.deleteHistory(x.p, x.systemKey, historyParams(a)),
    "messaging.historyByQuery": (x, a) => x.e.messages.history(x.p, x.systemKey, historyOfQuery(parseQuery(a.query ?? undefined))),
    "messaging.currentTopics": (x) => x.e.messages.currentTopics(x.p, x.systemKey),
    // a timer publishes as this run's user: the right to publish is checked now and at each firing
    "messaging.setTimer": async (x, a) => {
      await x.e.systems.access(x.p, x.systemKey);
      if (typeof a.topic === "string" && a.topic) await x.e.d.perms.require(x.p, { kind: "topic", name: a.topic }, LEVEL.CREATE, `publish to topic '${a.topic.slice(0, 200)}'`);
      return x.e.messageTimers.add(x.p, x.systemKey, timerKind(a.kind), { delayMs: a.timeout, topic: a.topic, payload: a.payload, iterations: a.iterations });
    },
    "messaging.cancelTimer": (x, a) => x.e.messageTimers.cancel(x.systemKey, timerKind(a.kind), a.id),
  },
};
