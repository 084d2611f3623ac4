// Messaging: ClearBlade.Messaging (publish, subscribe, waitForMessage) and ClearBladeAsync.Messaging.
import { fail } from "../../core/errors.ts";
import { RunInbox } from "../inbox.ts";
import type { HostContext, LibraryArea } from "./types.ts";

const js = String.raw`
  function Messaging() {
    return {
      publish: function (topic, payload, cb) { return classic("messaging.publish", { topic: topic, payload: typeof payload === "string" ? payload : JSON.stringify(payload) }, cb); },
      subscribe: function (topic, cb) { return classic("messaging.subscribe", { topic: topic }, cb); },
      unsubscribe: function (topic, cb) { return classic("messaging.unsubscribe", { topic: topic }, cb); },
      // blocks until the next message on the subscribed topics matching topics (all of them
      // when omitted) and calls cb(false, payload, topic) with it: one message per call, in the
      // order they came, kept since subscribe (stream services call it in a loop)
      waitForMessage: function (topics, cb) {
        if (typeof topics === "function") { cb = topics; topics = null; }
        if (typeof topics === "string") topics = [topics];
        var r = JSON.parse(hostSync("messaging.next", JSON.stringify({ topics: topics })));
        if (!r.ok) { if (typeof cb === "function") cb(true, r.error); return; }
        if (r.data === null) return; // the run is over
        if (typeof cb === "function") cb(false, r.data.payload, r.data.topic);
      },
    };
  }
  ClearBlade.Messaging = Messaging;
  ClearBladeAsync.Messaging = function () { return { publish: function (t, p) { return call("messaging.publish", { topic: t, payload: typeof p === "string" ? p : JSON.stringify(p) }); } }; };
`;

/** The run's subscriptions: they end with the run. */
const inboxOf = (x: HostContext) =>
  x.run.resource("inbox", () => {
    const inbox = new RunInbox((filter, deliver) => x.e.messages.subscribe(x.p, x.systemKey, filter, deliver));
    return { value: inbox, close: () => inbox.close() };
  });

export const messaging: LibraryArea = {
  js,
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
  },
};
