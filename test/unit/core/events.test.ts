// The event bus hands the events emitted in one stretch of synchronous code to its handlers in one
// microtask, in order (a broker emits one per publish), after the emitting code returns; an event
// a handler emits comes after them, and handlers run in the cause scope their event was emitted in.
import { expect, test } from "bun:test";
import { causeScope, EventBus } from "../../../src/core/events.ts";

test("events of one stretch are handled together, in order, after the emitter returns", async () => {
  const bus = new EventBus();
  const seen: string[] = [];
  bus.on((e) => {
    const topic = (e.payload as { topic: string }).topic;
    seen.push(topic);
    if (topic === "a") bus.emit("Messaging::Publish", "sk", { topic: "from-handler", body: "", userId: "" });
  }, ["Messaging::Publish"]);
  bus.emit("Messaging::Publish", "sk", { topic: "a", body: "", userId: "" });
  queueMicrotask(() => seen.push("microtask"));
  bus.emit("Messaging::Publish", "sk", { topic: "b", body: "", userId: "" });
  bus.emit("Messaging::Subscribe", "sk", { topic: "not-listened", userId: "" });
  expect(seen).toEqual([]);
  await Bun.sleep(0);
  expect(seen).toEqual(["a", "b", "microtask", "from-handler"]);
});

test("a failing handler does not keep the others or the next events from theirs", async () => {
  const bus = new EventBus();
  const seen: string[] = [];
  bus.on(() => { throw new Error("boom"); });
  bus.on((e) => { seen.push((e.payload as { topic: string }).topic); });
  bus.emit("Messaging::Publish", "sk", { topic: "a", body: "", userId: "" });
  bus.emit("Messaging::Publish", "sk", { topic: "b", body: "", userId: "" });
  await Bun.sleep(0);
  expect(seen).toEqual(["a", "b"]);
});

test("an event's handlers run in the cause scope it was emitted in", async () => {
  const bus = new EventBus();
  const seen: [string, number | undefined, number][] = [];
  bus.on((e) => { seen.push([(e.payload as { topic: string }).topic, causeScope.getStore()?.depth, e.depth]); });
  bus.emit("Messaging::Publish", "sk", { topic: "a", body: "", userId: "" });
  causeScope.run({ depth: 2 }, () => bus.emit("Messaging::Publish", "sk", { topic: "b", body: "", userId: "" }));
  bus.emit("Messaging::Publish", "sk", { topic: "c", body: "", userId: "" });
  await Bun.sleep(0);
  expect(seen).toEqual([["a", undefined, 0], ["b", 2, 2], ["c", undefined, 0]]);
});
