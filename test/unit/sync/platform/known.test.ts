// What a hello reads is kept in memory (src/sync/platform/known.ts): an edge coming back reads no
// record, template, system or log bound from the database, yet a changed token, template (its own
// entries or its named template's file), a commit, or a cluster, each makes the next hello see
// what is now true. And the acknowledgements and pings every edge sends are checked by hand
// exactly as the schema would check them.
import { afterAll, beforeAll, describe, expect, spyOn, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type App, start } from "../../../../src/app.ts";
import type { Principal } from "../../../../src/auth/principal.ts";
import { loadConfig } from "../../../../src/config.ts";
import { developersRepo } from "../../../../src/store/developers.ts";
import { edgesRepo } from "../../../../src/store/edges.ts";
import { changesRepo } from "../../../../src/store/sync.ts";
import { systemsRepo } from "../../../../src/store/systems.ts";
import { commonEdgeMessage, EdgeMessage } from "../../../../src/sync/protocol.ts";
import type { ElsewhereHub } from "../../../../src/sync/platform/hub.ts";

const templates = mkdtempSync(join(tmpdir(), "outpost-known-"));
let app: App;
let dev: Principal;
let sk: string;

beforeAll(async () => {
  writeFileSync(join(templates, "fleet.json"), JSON.stringify({ assets: [{ def_module: "collection", def_name: "a", mode: "sync_to_edge" }] }));
  app = await start(loadConfig(["--db", ":memory:", "--http-port", "0", "--log-level", "silent", "--sync-compact-ms", "3600000", "--edge-templates-dir", templates]));
  const reg = await app.services.developers.register({ email: "known@example.com", password: "pw" });
  dev = (await app.services.tokens.resolve(reg.dev_token))!;
  sk = (await app.services.systems.create(dev, { name: "known" })).system_key;
  for (const name of ["a", "b", "c"]) await app.services.collections.createCollection(dev, { name, appID: sk, columns: [{ name: "v", type: "int" }] });
});
afterAll(async () => { await app?.stop(); rmSync(templates, { recursive: true, force: true }); });

/** whether gw completed a hello (its next ones say it holds a snapshot) */
let helloed = false;

/** One link of an edge: its hello and what the platform answered until it was welcomed or refused. */
async function hello(edge: string, token: string, cursor = 0, synced = cursor > 0 || edge === "gw" && helloed): Promise<{ got: any[]; end: () => void }> {
  const hub = app.services.sync!;
  const got: any[] = [];
  const socket = {
    send: (text: string) => {
      const m = JSON.parse(text);
      got.push(m);
      if (m.t === "batch") void hub.message(socket, JSON.stringify({ t: "ack", upTo: m.upTo, snapshot: m.snapshot }));
      if (m.t === "snapshot_end") void hub.message(socket, JSON.stringify({ t: "ack", upTo: m.seq, snapshot: true }));
    },
    close: () => {},
  };
  hub.open(socket);
  await hub.message(socket, JSON.stringify({ t: "hello", systemKey: sk, edge, token, cursor, synced, pingMs: 600_000 }));
  if (got[0]?.t === "welcome") helloed = true;
  return { got, end: () => { void hub.close(socket, 1000); } };
}

const settle = async (pred: () => boolean | Promise<boolean>, ms = 5_000) => {
  const end = Date.now() + ms;
  while (!(await pred())) { if (Date.now() > end) throw new Error("timed out"); await Bun.sleep(10); }
};

/** Counts the reads a hello could make, while `fn` runs. */
async function reads(fn: () => Promise<unknown>) {
  const spies = { edge: spyOn(edgesRepo, "get"), edges: spyOn(edgesRepo, "some"), entries: spyOn(edgesRepo, "entries"), system: spyOn(systemsRepo, "byKey"), owner: spyOn(developersRepo, "byId"), maxSeq: spyOn(changesRepo, "maxSeq") };
  try {
    await fn();
    return Object.fromEntries(Object.entries(spies).map(([k, s]) => [k, s.mock.calls.length])) as Record<keyof typeof spies, number>;
  } finally {
    for (const s of Object.values(spies)) s.mockRestore();
  }
}

describe("what a hello reads, kept in memory", () => {
  let cursor = 0;

  test("an edge coming back reads nothing a hello read before from the database", async () => {
    await app.services.edges.create(dev, sk, "gw", { token: "gw-token-1", template: "fleet" });
    const first = await hello("gw", "gw-token-1");
    await settle(() => first.got.some((m) => m.t === "snapshot_end"));
    cursor = first.got.find((m) => m.t === "snapshot_end").seq;
    first.end();
    await app.services.sync!.lag(sk, "gw"); // its first contact written: the record is read again once
    const again = await hello("gw", "gw-token-1", cursor);
    again.end();
    const n = await reads(async () => {
      const third = await hello("gw", "gw-token-1", cursor);
      expect(third.got[0]).toMatchObject({ t: "welcome", snapshot: false, seq: cursor, template: [{ def_module: "collection", def_name: "a" }] });
      third.end();
    });
    expect(n).toEqual({ edge: 0, edges: 0, entries: 0, system: 0, owner: 0, maxSeq: 0 });
  });

  test("a new token refuses the old one at the next hello", async () => {
    await app.services.edges.update(dev, sk, "gw", { token: "gw-token-2" });
    const old = await hello("gw", "gw-token-1", cursor);
    expect(old.got[0]).toMatchObject({ t: "error", reason: "credentials" });
    const now = await hello("gw", "gw-token-2", cursor);
    expect(now.got[0]).toMatchObject({ t: "welcome" });
    now.end();
  });

  test("the edge's own entries and its named template's file are read again once changed", async () => {
    await app.services.edges.changeTemplate(dev, sk, "gw", { add: [{ def_module: "collection", def_name: "b", mode: "sync_to_edge" }] });
    const own = await hello("gw", "gw-token-2", cursor);
    expect(own.got[0].template.map((e: any) => e.def_name).sort()).toEqual(["a", "b"]);
    own.end();
    // the file changes (its size does): the next hello reads it
    writeFileSync(join(templates, "fleet.json"), JSON.stringify({ assets: [{ def_module: "collection", def_name: "a", mode: "sync_to_edge" }, { def_module: "collection", def_name: "c", mode: "sync_to_edge" }] }));
    const named = await hello("gw", "gw-token-2", cursor);
    expect(named.got[0].template.map((e: any) => e.def_name).sort()).toEqual(["a", "b", "c"]);
    named.end();
  });

  test("a commit moves the log's head a hello hands out", async () => {
    const { collectionID } = await app.services.collections.createCollection(dev, { name: "z", appID: sk, columns: [{ name: "v", type: "int" }] });
    expect(collectionID).toBeTruthy();
    // (a commit is announced to the hub on the turn of the event loop after it)
    await new Promise((r) => setImmediate(r));
    const head = await changesRepo.maxSeq(app.db, sk);
    expect(head).toBeGreaterThan(cursor);
    const h = await hello("gw", "gw-token-2", cursor);
    expect(h.got[0]).toMatchObject({ t: "welcome", seq: head, snapshot: false });
    h.end();
  });

  test("in a cluster (another node's writes send no signal) the record is read at every hello", async () => {
    const elsewhere = { control: async () => null, retry: async () => null, relay: async () => null, op: async () => null, relayMessage: async () => false } satisfies ElsewhereHub;
    app.services.sync!.d.elsewhere.attach(elsewhere);
    const n = await reads(async () => { const h = await hello("gw", "gw-token-2", cursor); expect(h.got[0].t).toBe("welcome"); h.end(); });
    expect(n.edge + n.edges).toBe(1);
    expect(n.maxSeq).toBe(1);
  });

  test("in a cluster the hellos of one turn share one read of their records and one of the log's bounds, begun after them", async () => {
    for (const name of ["herd-1", "herd-2", "herd-3"]) await app.services.edges.create(dev, sk, name, { token: `${name}-token` });
    const n = await reads(async () => {
      const links = await Promise.all(["herd-1", "herd-2", "herd-3"].map((name) => hello(name, `${name}-token`)));
      for (const l of links) { expect(l.got[0].t).toBe("welcome"); l.end(); }
    });
    expect(n).toMatchObject({ edge: 0, edges: 1, maxSeq: 1 });
    // asked in a later turn, read again: what changed meanwhile (another node's writes) is seen
    await app.services.edges.update(dev, sk, "herd-1", { token: "herd-1-token-2" });
    const later = await hello("herd-1", "herd-1-token-2");
    expect(later.got[0].t).toBe("welcome");
    later.end();
  });
});

describe("a fleet's templates made at once", () => {
  test("each edge gets what its own template, its named template and the deployments naming it make", async () => {
    const s = app.services;
    await s.edges.create(dev, sk, "n1", { token: "n1-token-x", template: "fleet" });
    await s.edges.create(dev, sk, "n2", { token: "n2-token-x", template: "fleet" });
    await s.edges.create(dev, sk, "n3", { token: "n3-token-x" });
    await s.edges.changeTemplate(dev, sk, "n1", { add: [{ def_module: "collection", def_name: "b", mode: "sync" }], remove: [{ def_module: "collection", def_name: "a" }] });
    await s.edges.changeTemplate(dev, sk, "n3", { add: [{ def_module: "collection", def_name: "c", mode: "sync_to_platform" }] });
    await s.deployments.create(dev, sk, { name: "d1", assets: [{ asset_class: "b", asset_id: "", sync_to_edge: true, sync_to_platform: false }, { asset_class: "services", asset_id: "", sync_to_edge: true, sync_to_platform: false }], edges: ["n2", "n3"] });
    const rows = (await edgesRepo.all(app.db, sk)).filter((e) => e.name.startsWith("n"));
    const all = await s.edges.templatesOf(app.db, sk, rows);
    expect([...all.keys()].sort()).toEqual(["n1", "n2", "n3"]);
    for (const e of rows) expect(all.get(e.name)).toEqual(await s.edges.templateOf(app.db, sk, e));
    // (the three differ: the comparison says something)
    expect(new Set(rows.map((e) => JSON.stringify(all.get(e.name)))).size).toBe(3);
  });
});

describe("acknowledgements and pings checked by hand", () => {
  const same = (x: unknown) => {
    const fast = commonEdgeMessage(x);
    const full = EdgeMessage.safeParse(x);
    expect(full.success).toBe(true);
    expect(fast).toEqual(full.data as never);
  };

  test("what they take is what the schema makes of it (unknown keys dropped)", () => {
    same({ t: "ack", upTo: 12 });
    same({ t: "ack", upTo: 0, snapshot: true, results: [] });
    same({ t: "ack", upTo: 5, snapshot: false, extra: "dropped" });
    same({ t: "ping" });
    same({ t: "ping", outbox: 3, other: 1 });
  });

  test("anything else is left to the schema", () => {
    for (const x of [null, [], "ack", { t: "ack" }, { t: "ack", upTo: -1 }, { t: "ack", upTo: 1.5 }, { t: "ack", upTo: "1" }, { t: "ack", upTo: 2 ** 60 },
      { t: "ack", upTo: 1, snapshot: "yes" }, { t: "ack", upTo: 1, results: {} }, { t: "ping", outbox: -2 }, { t: "ping", outbox: Number.NaN }]) {
      expect(commonEdgeMessage(x)).toBeUndefined();
      expect(EdgeMessage.safeParse(x).success).toBe(false);
    }
    // results to record, and every other message, take the schema's path
    expect(commonEdgeMessage({ t: "ack", upTo: 1, results: [{ type: "row", name: "a", seq: 1 }] })).toBeUndefined();
    expect(commonEdgeMessage({ t: "up", items: [] })).toBeUndefined();
  });
});
