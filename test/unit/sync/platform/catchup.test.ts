// In a cluster, another node's commit reaches this node's sessions as a signal over Redis, which a
// reconnect can lose. The hub's catch-up pass makes idle sessions read their system's log again:
// here the commit's signal is dropped (the hub is detached from commits), and the change reaches
// the edge only through that pass, and only when the node is part of a cluster.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { App } from "../../../../src/app.ts";
import type { Principal } from "../../../../src/auth/principal.ts";
import type { ElsewhereHub, SyncHub } from "../../../../src/sync/platform/hub.ts";
import { settle, startHubApp } from "../hubApp.ts";

let app: App;
let hub: SyncHub;
let dev: Principal;
let sk: string;

beforeAll(async () => ({ app, hub, dev, sk } = await startHubApp("catchup")));
afterAll(() => app.stop());

test("a commit whose signal was lost reaches a connected edge at the next catch-up pass, in a cluster only", async () => {
  const cols = app.services.collections;
  const { collectionID } = await cols.createCollection(dev, { name: "readings", appID: sk, columns: [{ name: "v", type: "int" }] });
  await app.services.edges.create(dev, sk, "gw", { token: "gw-token" });
  await app.services.edges.changeTemplate(dev, sk, "gw", { add: [{ def_module: "collection", def_name: "readings", mode: "sync_to_edge" }] });
  const got: any[] = [];
  const socket = {
    send: (text: string) => {
      const m = JSON.parse(text);
      got.push(m);
      if (m.t === "batch") void hub.message(socket, JSON.stringify({ t: "ack", upTo: m.upTo, snapshot: m.snapshot, results: [] }));
      if (m.t === "snapshot_end") void hub.message(socket, JSON.stringify({ t: "ack", upTo: m.seq, snapshot: true, results: [] }));
    },
    close: () => {},
  };
  hub.open(socket);
  await hub.message(socket, JSON.stringify({ t: "hello", systemKey: sk, edge: "gw", token: "gw-token", cursor: 0, synced: false, incarnation: "", pingMs: 600_000 }));
  await settle(async () => (await hub.status(sk, "gw")).every((a) => a.status === "synced"));
  const liveRows = () => got.filter((m) => m.t === "batch" && !m.snapshot).flatMap((m) => m.changes.filter((c: any) => c.type === "row"));

  // the signal of the next commit is lost: the hub no longer hears this node's commits
  (hub as unknown as { offCommitted: () => void }).offCommitted();
  await cols.insert(dev, await cols.byIdFor(dev, collectionID), [{ v: 7 }]);
  const pass = () => (hub as unknown as { catchUpElsewhere: () => void }).catchUpElsewhere();

  // a node alone has nothing to catch up with (its own commits always wake its sessions): the
  // pass returns without a read, so the edge is not sent the change
  pass();
  expect(await hub.lag(sk, "gw")).toBeGreaterThan(0);
  expect(liveRows()).toEqual([]);

  // in a cluster the pass reads the log again and sends the edge what it lacks
  const elsewhere = { control: async () => null, retry: async () => null, relay: async () => null, op: async () => null, relayMessage: async () => false } satisfies ElsewhereHub;
  hub.d.elsewhere.attach(elsewhere);
  pass();
  await settle(() => liveRows().length === 1);
  expect(liveRows()[0]).toMatchObject({ op: "upsert" });
  await settle(async () => (await hub.lag(sk, "gw")) === 0);
});
