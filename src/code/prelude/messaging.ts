// Messaging: ClearBlade.Messaging (publish, subscribe, waitForMessage) and ClearBladeAsync.Messaging.
import type { PreludeArea } from "./area.ts";

const js = String.raw`
  // made on every run: its methods live on the prototype (a fresh closure costs about 2 µs here)
  function Messaging() {
    if (!(this instanceof Messaging)) return new Messaging();
  }
  Messaging.prototype.publish = function (topic, payload, cb) { return classic("messaging.publish", { topic: topic, payload: typeof payload === "string" ? payload : JSON.stringify(payload) }, cb); };
  Messaging.prototype.subscribe = function (topic, cb) { return classic("messaging.subscribe", { topic: topic }, cb); };
  Messaging.prototype.unsubscribe = function (topic, cb) { return classic("messaging.unsubscribe", { topic: topic }, cb); };
  // blocks until the next message on the subscribed topics matching topics (all of them when
  // omitted) and calls cb(false, payload, topic) with it: one message per call, in the order they
  // came, kept since subscribe (stream services call it in a loop)
  Messaging.prototype.waitForMessage = function (topics, cb) {
    if (typeof topics === "function") { cb = topics; topics = null; }
    if (typeof topics === "string") topics = [topics];
    var r = JSON.parse(hostSync("messaging.next", JSON.stringify({ topics: topics })));
    if (!r.ok) { if (typeof cb === "function") cb(true, r.error); return; }
    if (r.data === null) return; // the run is over
    if (typeof cb === "function") cb(false, r.data.payload, r.data.topic);
  };
  ClearBlade.Messaging = Messaging;
  ClearBladeAsync.Messaging = function () { return { publish: function (t, p) { return call("messaging.publish", { topic: t, payload: typeof p === "string" ? p : JSON.stringify(p) }); } }; };
`;

// History, topics and messaging timers (ClearBlade's Messaging extras), added to what Messaging()
// returns, and ClearBladeAsync.MessageHistory.
const extrasJs = String.raw`
  function historyArgs(topic, count, last, start, stop) { return { topic: topic, count: count, last: last, start: start, stop: stop }; }
  var M = Messaging.prototype;
  // "start" is sent as the time to read back from ("last"), as ClearBlade's own clients do
  M.getMessageHistory = function (topic, start, count, cb) { return classic("messaging.history", historyArgs(topic, count, start || null, null, null), cb); };
  M.getMessageHistoryWithTimeFrame = function (topic, count, last, start, stop, cb) { return classic("messaging.history", historyArgs(topic, count, last, start, stop), cb); };
  M.getAndDeleteMessageHistory = function (topic, count, last, start, stop, cb) { return classic("messaging.takeHistory", historyArgs(topic, count, last, start, stop), cb); };
  M.getCurrentTopics = function (cb) { return classic("messaging.currentTopics", null, cb); };
  M.setTimeout = function (timeout, topic, data, cb) { return classic("messaging.setTimer", { kind: "timeout", timeout: timeout, topic: topic, payload: data }, cb); };
  M.cancelCBTimeout = function (id, cb) { return classic("messaging.cancelTimer", { kind: "timeout", id: id }, cb); };
  M.setInterval = function (timeout, topic, data, iterations, cb) { return classic("messaging.setTimer", { kind: "interval", timeout: timeout, topic: topic, payload: data, iterations: iterations }, cb); };
  M.cancelCBInterval = function (id, cb) { return classic("messaging.cancelTimer", { kind: "interval", id: id }, cb); };
  ClearBlade.Messaging = function (options, cb) {
    var m = new Messaging(options);
    if (typeof cb === "function") cb(false, m);
    return m;
  };
  ClearBladeAsync.MessageHistory = function () {
    return { read: function (q) { return call("messaging.historyByQuery", { query: plainQuery(q) }); } };
  };
`;

export const messaging: PreludeArea = { js: js + extrasJs };
