// Two nodes joined over an in-process bus (what crosses is JSON, as through Redis): every signal
// marked shared said on one node is heard on the other as remote, once, and not echoed back; a
// signal kept local stays on its node. A commit's news crosses once its transaction has ended.
import { expect, test } from "bun:test";
import type { ClusterBus } from "../../../src/cluster/bus.ts";
import { joinCluster } from "../../../src/cluster/cluster.ts";
import type { NodeRegistry } from "../../../src/cluster/nodes.ts";
import { createLogger } from "../../../src/core/log.ts";
import { Port } from "../../../src/core/port.ts";
import { SIGNAL_SHARED, type SignalName, type SignalPayloads, Signals } from "../../../src/core/signals.ts";
import type { ChangeRecorder } from "../../../src/domain/changes.ts";
import type { Systems } from "../../../src/domain/systems.ts";
import { type Db, openDb } from "../../../src/store/db.ts";
import type { ElsewhereHub, SyncHub } from "../../../src/sync/platform/hub.ts";

/** The buses of the nodes joined: what one sends, the others receive (as JSON). */
class FakeBus {
  static readonly all: FakeBus[] = [];
  private readonly handlers = new Map<string, ((body: unknown) => void)[]>();
  constructor(readonly nodeId: string) { FakeBus.all.push(this); }
  on(kind: string, h: (body: unknown) => void) { this.handlers.set(kind, [...(this.handlers.get(kind) ?? []), h]); }
  serve() {}
  onResync() {}
  send(m: { kind: string; to?: string; body?: unknown }) {
    const text = JSON.stringify(m.body);
    for (const other of FakeBus.all) {
      if (other === this || (m.to && m.to !== other.nodeId)) continue;
      for (const h of other.handlers.get(m.kind) ?? []) h(JSON.parse(text));
    }
  }
  request(): Promise<never> { return Promise.reject(new Error("no requests here")); }
}

/** One payload per signal (a signal added without one here does not compile). */
const SAMPLES: { [K in SignalName]: SignalPayloads[K] } = {
  "tokens.revoked": { hashes: ["h1", "h2"] },
  "tokens.subjectChanged": { kind: "device", id: "d1", systemKey: "sk" },
  "tokens.systemChanged": { systemKey: "sk" },
  "permissions.changed": { systemKey: "sk" },
  "system.changed": { systemKey: "sk" },
  "collection.changed": { collectionId: "c1" },
  "collection.written": { collectionId: "c1", added: 3 },
  "code.changed": { systemKey: "sk", name: "svc", kind: "service", deleted: false },
  "triggers.changed": { systemKey: "sk" },
  "edge.changed": { systemKey: "sk", edge: "e1", what: "template" },
  "serviceCache.changed": { systemKey: "sk", name: null },
  "sessions.ended": { hashes: ["h3"] },
  "system.removed": { systemKey: "sk" },
  "bucketSet.fileChanged": { systemKey: "sk", set: "s1", path: "outbox/a.txt", deleted: false },
  "fileSync.queued": { systemKey: "sk", edge: "e1" },
};
const NAMES = Object.keys(SAMPLES) as SignalName[];

/** `db`, `changes`, `hub`: the node's (stand-ins that do nothing by default) */
function node(id: string, over: { db?: Db; changes?: ChangeRecorder; hub?: SyncHub } = {}) {
  const signals = new Signals();
  const heard: { name: SignalName; payload: unknown; remote: boolean }[] = [];
  for (const name of NAMES) signals.on(name, (payload, remote) => { heard.push({ name, payload, remote }); });
  const elsewhere = new Port<ElsewhereHub>("edges elsewhere");
  joinCluster({
    db: over.db ?? (null as unknown as Db), log: createLogger("silent"), nodeId: id, bus: new FakeBus(id) as unknown as ClusterBus,
    nodes: { alive: [] } as unknown as NodeRegistry, signals, systems: { keys: async () => [] } as unknown as Systems,
    changes: over.changes ?? ({ onCommitted: () => () => {} } as unknown as ChangeRecorder), hub: over.hub ?? ({} as SyncHub), elsewhere,
  });
  signals.start();
  return { signals, heard, elsewhere };
}

test("each shared signal crosses to the other node as remote, once; a local one does not", () => {
  const a = node("a"), b = node("b");
  expect(a.elsewhere.get()).not.toBeNull(); // the cluster reaches the edges other nodes hold
  const shared = NAMES.filter((n) => SIGNAL_SHARED[n]);
  const local = NAMES.filter((n) => !SIGNAL_SHARED[n]);
  expect(shared.length).toBeGreaterThan(0);
  expect(local).toEqual(["system.removed", "bucketSet.fileChanged"]);

  for (const name of NAMES) {
    a.heard.length = 0; b.heard.length = 0;
    a.signals.emit(name, SAMPLES[name] as never);
    // a shared signal said after it proves the bus delivered what it was given
    if (!SIGNAL_SHARED[name]) a.signals.emit("system.changed", { systemKey: "proof" });
    expect(a.heard[0]).toEqual({ name, payload: SAMPLES[name], remote: false });
    if (SIGNAL_SHARED[name]) {
      expect(b.heard).toEqual([{ name, payload: SAMPLES[name], remote: true }]);
      expect(a.heard).toHaveLength(1); // not echoed back
    } else {
      expect(b.heard).toEqual([{ name: "system.changed", payload: { systemKey: "proof" }, remote: true }]);
    }
  }

  // and the other way
  b.heard.length = 0; a.heard.length = 0;
  b.signals.emit("edge.changed", { systemKey: "sk", edge: "e2", what: "deleted" });
  expect(a.heard).toEqual([{ name: "edge.changed", payload: { systemKey: "sk", edge: "e2", what: "deleted" }, remote: true }]);
});

test("a commit's news reaches the other nodes once its transaction has ended, not while it is open", async () => {
  // the recorder tells its listeners while the transaction that wrote the change may still be
  // open (this node's reads wait for it; another node's would read the log before the change)
  FakeBus.all.length = 0; // (the nodes of the test before are not part of this cluster)
  const db = await openDb({ url: ":memory:" });
  const listeners: ((sk: string, assets: ReadonlySet<string>) => void)[] = [];
  const changes = { onCommitted: (fn: (typeof listeners)[number]) => { listeners.push(fn); return () => {}; } } as unknown as ChangeRecorder;
  const woken: { sk: string; assets: string[] }[] = [];
  const hub = { wake: (sk: string, assets: ReadonlySet<string>) => woken.push({ sk, assets: [...assets] }) } as unknown as SyncHub;
  node("writer", { db, changes });
  node("reader", { hub });
  let release!: () => void;
  const open = new Promise<void>((r) => (release = r));
  const tx = db.tx(async () => {
    for (const l of listeners) l("sk", new Set(["row\u0000c1"]));
    await open;
  });
  await Bun.sleep(20);
  expect(woken).toEqual([]); // the transaction is still open
  release();
  await tx;
  await Bun.sleep(0);
  expect(woken).toEqual([{ sk: "sk", assets: ["row\u0000c1"] }]);
  await db.close();
});
