// A platform stopping with a fleet connected: the listener ends the links first (it stops before
// the sync hub), and their closes are still writing when the hub stops. The hub waits for them,
// the database outlives every one of those writes (none fails, none is lost), and what the node
// still held is disconnected in one statement, with when it was last heard.
import { afterAll, expect, spyOn, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type App, start } from "../../../src/app.ts";
import { loadConfig } from "../../../src/config.ts";
import { createLogger } from "../../../src/core/log.ts";
import { clusterRepo } from "../../../src/store/cluster.ts";
import { openDb } from "../../../src/store/db.ts";
import { edgesRepo } from "../../../src/store/edges.ts";

const FLEET = 60;
const dir = mkdtempSync(join(tmpdir(), "outpost-hub-stop-"));
const dbUrl = `file:${join(dir, "db.sqlite")}`;
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("links closed by the listener as the platform stops: their writes end before the database goes, the edges are disconnected", async () => {
  const logs: string[] = [];
  const app: App = await start(loadConfig(["--db", dbUrl, "--http-port", "0", "--log-level", "info"]), { log: createLogger("info", {}, (l) => logs.push(l)) });
  const s = app.services;
  const reg = await s.developers.register({ email: "stop@example.com", password: "pw" });
  const dev = (await s.tokens.resolve(reg.dev_token))!;
  const sk = (await s.systems.create(dev, { name: "stop" })).system_key;
  const hub = s.sync!;
  const sockets: { send(t: string): void; close(): void }[] = [];
  for (let i = 0; i < FLEET; i++) {
    await s.edges.create(dev, sk, `e${i}`, { token: `e${i}-token` });
    const socket = { send: () => {}, close: () => {} };
    hub.open(socket);
    await hub.message(socket, JSON.stringify({ t: "hello", systemKey: sk, edge: `e${i}`, token: `e${i}-token`, cursor: 0, synced: false, pingMs: 600_000, version: "fake 1" }));
    sockets.push(socket);
  }
  const until = Date.now() + 10_000;
  while ((await edgesRepo.all(app.db, sk)).some((e) => !e.is_connected) && Date.now() < until) await Bun.sleep(10);
  expect((await edgesRepo.all(app.db, sk)).every((e) => e.is_connected === 1)).toBe(true);

  const failures: unknown[] = [];
  const onRejection = (err: unknown) => failures.push(err);
  process.on("unhandledRejection", onRejection);
  // each close's own release slow, as on a busy database: they are under way when the stop comes
  const releaseNow = clusterRepo.releaseEdge;
  const released = spyOn(clusterRepo, "releaseEdge").mockImplementation(async (...a) => { await Bun.sleep(50); return releaseNow(...a); });
  const releasedAll = spyOn(clusterRepo, "releaseEdgesOf");
  const before = Math.floor(Date.now() / 1000);
  let one = 0, all: unknown[][] = [];
  try {
    // what the listener's stop does to every link, then the rest of the stop at once
    for (const socket of sockets) void hub.close(socket, 1006, "");
    await app.stop();
    await Bun.sleep(100);
    one = released.mock.calls.length;
    all = releasedAll.mock.calls.map((c) => c.slice(1));
  } finally {
    process.off("unhandledRejection", onRejection);
    released.mockRestore();
    releasedAll.mockRestore();
  }
  expect(failures).toEqual([]);
  expect(logs.filter((l) => /"level":"error"/.test(l))).toEqual([]);
  // the closes that came before the hub stopped free their edges one by one (and the stop waited
  // for them); the stop frees whatever else the node held, at once
  expect(one).toBeLessThanOrEqual(FLEET);
  expect(all).toEqual([[app.services.sync === undefined ? "" : expect.any(String), expect.any(Number)]]);

  const db = await openDb({ url: dbUrl });
  try {
    const rows = await edgesRepo.all(db, sk);
    expect(rows.length).toBe(FLEET);
    for (const e of rows) {
      expect(e.is_connected).toBe(0);
      expect(e.last_talked).toBeGreaterThanOrEqual(before);
    }
  } finally {
    await db.close();
  }
});
