// A node taken for dead while it lives (its heartbeat late behind a herd's database work): the
// others free its edges, and its live links mark them connected to it again at their next
// batch of writes; heartbeats never overlap, so none judges the others on a stale read.
import { afterAll, beforeAll, describe, expect, spyOn, test } from "bun:test";
import type { App } from "../../../src/app.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import { HEARTBEAT_MS, NodeRegistry } from "../../../src/cluster/nodes.ts";
import { createLogger } from "../../../src/core/log.ts";
import type { Db } from "../../../src/store/db.ts";
import { clusterRepo } from "../../../src/store/cluster.ts";
import { edgesRepo } from "../../../src/store/edges.ts";
import { startHubApp } from "../sync/hubApp.ts";

let app: App;
let dev: Principal;
let sk: string;

beforeAll(async () => ({ app, dev, sk } = await startHubApp("cluster-nodes")));
afterAll(() => app.stop());

const held = async (name: string) => { const r = (await clusterRepo.holderOf(app.db, sk, name))!; return [r.is_connected, r.node_id]; };

describe("edges of a node taken for dead", () => {
  test("the holder's next write of its links marks those freed connected to it again, never one another node took", async () => {
    for (const n of ["freed", "taken", "kept"]) await app.services.edges.create(dev, sk, n, { token: `${n}-token` });
    await app.db.tx((tx) => edgesRepo.updateMany(tx, sk, ["freed", "taken", "kept"], {}, "node-a"));
    // node-b took node-a for dead: every edge of node-a freed; then "taken" connected to node-b
    await clusterRepo.releaseEdgesOfDead(app.db, ["node-b"]);
    expect(await held("freed")).toEqual([0, ""]);
    await app.db.tx((tx) => edgesRepo.updateMany(tx, sk, ["taken"], {}, "node-b"));
    // node-a's links of all three (the one moved is a link node-a has not yet seen closed) pinged
    await app.db.tx((tx) => edgesRepo.talked(tx, sk, 2_000, [{ name: "freed", cursor: 7 }, { name: "taken", cursor: null }, { name: "kept", cursor: null }], "node-a"));
    expect(await held("freed")).toEqual([1, "node-a"]);
    expect(await held("kept")).toEqual([1, "node-a"]);
    expect(await held("taken")).toEqual([1, "node-b"]);
    expect((await edgesRepo.get(app.db, sk, "freed"))!.cursor).toBe(7);
    expect((await edgesRepo.get(app.db, sk, "taken"))!.last_talked).toBe(2_000);
  });

  test("a link that ended stays released: its node's last write goes before the release", async () => {
    await app.services.edges.create(dev, sk, "gone", { token: "gone-token" });
    await app.db.tx((tx) => edgesRepo.talked(tx, sk, 3_000, [{ name: "gone", cursor: null }], "node-a"));
    await clusterRepo.releaseEdge(app.db, sk, "gone", "node-a", 3_001);
    expect(await held("gone")).toEqual([0, ""]);
  });
});

describe("a link's close", () => {
  test("a close whose writes fail ends the session all the same, and is not made again", async () => {
    await app.services.edges.create(dev, sk, "closing", { token: "closing-token" });
    const hub = app.services.sync!;
    const got: { t: string }[] = [];
    const socket = { send: (t: string) => { got.push(JSON.parse(t)); }, close: () => {} };
    hub.open(socket);
    await hub.message(socket, JSON.stringify({ t: "hello", systemKey: sk, edge: "closing", token: "closing-token", cursor: 0, synced: false, pingMs: 600_000 }));
    expect(got[0]?.t).toBe("welcome");
    expect(hub.isConnected(sk, "closing")).toBe(true);
    const release = spyOn(clusterRepo, "releaseEdge").mockImplementation(() => Promise.reject(new Error("the database cannot be reached")));
    try {
      expect(hub.close(socket, 1006)).rejects.toThrow("cannot be reached");
      // (out of the sessions before its writes: a sweep does not find it again)
      expect(hub.isConnected(sk, "closing")).toBe(false);
      await Bun.sleep(50);
      await hub.close(socket, 1006);
      expect(release).toHaveBeenCalledTimes(1);
    } finally { release.mockRestore(); }
  });
});

describe("heartbeats", () => {
  test("one at a time: a beat slower than the period is not joined by another; a stop waits for it", async () => {
    let running = 0, most = 0, beats = 0, leftAfterBeat = false;
    // the first beat (at the start) is quick, the next ones take longer than two periods
    const slow = {
      dialect: app.db.dialect,
      async run(sql: string, args?: readonly unknown[]) {
        if (sql.startsWith("INSERT INTO cluster_nodes") && ++beats > 1) { running++; most = Math.max(most, running); await Bun.sleep(2.5 * HEARTBEAT_MS); running--; }
        if (sql.startsWith("DELETE FROM cluster_nodes WHERE node_id")) leftAfterBeat = running === 0;
        return app.db.run(sql, args);
      },
      all: (sql: string, args?: readonly unknown[]) => app.db.all(sql, args),
    } as unknown as Db;
    const reg = new NodeRegistry({ db: slow, log: createLogger("silent"), nodeId: "slow-node", clustered: true });
    await reg.start();
    await Bun.sleep(2.25 * HEARTBEAT_MS);
    await reg.stop();
    expect(beats).toBe(2);
    expect(most).toBe(1);
    // (a beat after the leave would show the stopped node alive)
    expect(leftAfterBeat).toBe(true);
  }, 20_000);
});
