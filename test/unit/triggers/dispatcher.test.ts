// The trigger dispatcher's index follows trigger changes: a trigger is live when its create
// returns, and a slow reload that read the triggers before a change can never land after the
// reload that read the change (the newer index would be replaced by an older one, and the new
// trigger would never fire). In-process, on a real database and the real code engine.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type App, start } from "../../../src/app.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import { loadConfig } from "../../../src/config.ts";
import { parseQuery } from "../../../src/core/query.ts";

let app: App;
let dev: Principal;
let sk = "";
let readings = "", events = "";

async function until(check: () => Promise<boolean>, ms = 5_000) {
  for (const end = Date.now() + ms; Date.now() < end;) { if (await check()) return true; await Bun.sleep(20); }
  return false;
}

/** Runs of the service recording under `tag`. */
const recordedRuns = async (tag = "run") => {
  const s = app.services;
  return (await s.collections.fetch(dev, await s.collections.byIdFor(dev, events), parseQuery({ FILTERS: [[{ EQ: [{ tag }] }]], PAGESIZE: 0 }))).total;
};
const recorder = (name: string, tag: string) => app.services.services.create(dev, sk, name, { code: `function ${name}(req, resp) {
    ClearBlade.Collection({ collectionName: "events" }).create({ tag: "${tag}" }, function (err, d) { if (err) resp.error(d); else resp.success("ok"); });
  }` });

beforeAll(async () => {
  app = await start(loadConfig(["--db", ":memory:", "--http-port", "0", "--mqtt-port", "0", "--mqtt-ws-port", "0", "--log-level", "silent"]));
  const s = app.services;
  dev = (await s.tokens.resolve((await s.developers.register({ email: "disp@example.com", password: "pw" })).dev_token))!;
  sk = (await s.systems.create(dev, { name: "disp" })).system_key;
  readings = (await s.collections.createCollection(dev, { name: "readings", appID: sk })).collectionID;
  events = (await s.collections.createCollection(dev, { name: "events", appID: sk })).collectionID;
  await s.collections.updateCollection(dev, { id: events, addColumn: { name: "tag", type: "string" } });
  await s.collections.updateCollection(dev, { id: readings, addColumn: { name: "v", type: "int" } });
  await recorder("record", "run");
  await recorder("probe", "probe");
});
afterAll(() => app.stop());

describe("the trigger index", () => {
  test("a reload that read the triggers before a change does not replace the index that has it", async () => {
    const triggers = app.services.triggers;
    const read = triggers.allTriggers.bind(triggers);
    // the next read is slow: it sees the triggers as they are now, and answers later
    let slowDone!: () => void;
    const slowLanded = new Promise<void>((r) => (slowDone = r));
    let slow = true;
    triggers.allTriggers = async () => {
      if (!slow) return read();
      slow = false;
      const rows = await read();
      setTimeout(slowDone, 300);
      await slowLanded;
      return rows;
    };
    try {
      void triggers.changed(sk); // some other change started a reload: the slow one
      await triggers.createTrigger(dev, sk, "onReading", { def_module: "Data", def_name: "ItemCreated", key_value_pairs: { collectionName: "readings" }, service_name: "record" });
      await slowLanded;
      await Bun.sleep(0); // whatever the slow reload does when it lands has been done
      const s = app.services;
      await s.collections.insert(dev, await s.collections.byIdFor(dev, readings), {});
      expect(await until(async () => (await recordedRuns()) === 1)).toBe(true);
    } finally {
      triggers.allTriggers = read;
    }
  });

  test("a trigger fires for the first event after its create returns, and not after its delete returns", async () => {
    const s = app.services;
    const before = await recordedRuns();
    await s.triggers.createTrigger(dev, sk, "second", { def_module: "Data", def_name: "ItemCreated", key_value_pairs: { collectionName: "readings" }, service_name: "record" });
    await s.collections.insert(dev, await s.collections.byIdFor(dev, readings), {});
    // both triggers run for it
    expect(await until(async () => (await recordedRuns()) === before + 2)).toBe(true);
    await s.triggers.deleteTrigger(dev, sk, "second");
    await s.triggers.deleteTrigger(dev, sk, "onReading");
    await s.collections.insert(dev, await s.collections.byIdFor(dev, readings), {});
    // a trigger on another event, added after: once its run is recorded, the insert before it was
    // dispatched (events are dispatched in order) and its runs, had there been any, started
    await s.triggers.createTrigger(dev, sk, "probe", { def_module: "Data", def_name: "ItemUpdated", key_value_pairs: { collectionName: "readings" }, service_name: "probe" });
    await s.collections.update(dev, await s.collections.byIdFor(dev, readings), { query: [], $set: { v: 1 } });
    expect(await until(async () => (await recordedRuns("probe")) === 1)).toBe(true);
    expect(await recordedRuns()).toBe(before + 2);
  });
});

describe("matching", () => {
  test("an event no trigger's filters match costs no system lookup; one they match fires", async () => {
    const s = app.services;
    await s.triggers.createTrigger(dev, sk, "onAlert", { def_module: "Messaging", def_name: "Publish", key_value_pairs: { topic: "alerts/#" }, service_name: "record" });
    const before = await recordedRuns();
    const find = s.systems.find.bind(s.systems);
    let lookups = 0;
    s.systems.find = (key: string) => { lookups++; return find(key); };
    try {
      // every publish is matched against the trigger's topic (events are dispatched in order)
      for (let i = 0; i < 50; i++) app.events.emit("Messaging::Publish", sk, { topic: `telemetry/${i}`, body: "x", userId: "" });
      await Bun.sleep(50);
      expect(lookups).toBe(0);
      app.events.emit("Messaging::Publish", sk, { topic: "alerts/fire", body: "x", userId: "" });
      expect(await until(async () => (await recordedRuns()) === before + 1)).toBe(true);
      expect(lookups).toBeGreaterThan(0);
    } finally {
      s.systems.find = find;
      await s.triggers.deleteTrigger(dev, sk, "onAlert");
    }
  });
});
