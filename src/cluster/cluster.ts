// Several platform nodes behind a load balancer, on one database, coordinated through Redis.
//
//  - MQTT: the brokers share one emitter on Redis (mqemitter-redis), so a publish on any node
//    reaches the subscribers of every node; sessions, queues, retained messages and wills are in
//    the database, and each broker tells the others of its subscription changes (see
//    broker/persistence.ts); aedes closes the older connection of a client id that connects to
//    another node (its `$SYS/<node>/new/clients` messages go through the shared emitter).
//  - Caches: the signals marked shared (core/signals.ts) are forwarded through the bus and emitted
//    again on every other node, so a revoked token or a changed role holds everywhere at once
//    rather than after the caches' lifetimes.
//  - Edge sync: every node records changes in the shared log; a commit wakes the edge sessions of
//    every node; an edge's connection is held by one node (its record names the node), and control
//    commands, retries and relayed messages for it go to that node (relayed messages for every
//    edge go to every node).
import Redis from "ioredis";
import MQEmitterRedis from "mqemitter-redis";
import type { Logger } from "../core/log.ts";
import type { Port } from "../core/port.ts";
import { SIGNAL_SHARED, type SignalName, type SignalPayloads, type Signals } from "../core/signals.ts";
import type { Systems } from "../domain/systems.ts";
import type { Db } from "../store/db.ts";
import { clusterRepo } from "../store/cluster.ts";
import type { ChangeRecorder } from "../domain/changes.ts";
import type { ControlResult } from "../adapters/runner.ts";
import type { ElsewhereHub, RelayRequest, SyncHub } from "../sync/platform/hub.ts";
import { ApiError, type ErrorKindName, ErrorKinds, fail } from "../core/errors.ts";
import { BODY_MAX_BYTES, chunked, type EdgeOp } from "../sync/fleet.ts";
import type { ClusterBus } from "./bus.ts";
import { HEARTBEAT_MS, type NodeRegistry } from "./nodes.ts";

/** The brokers' shared emitter, on connections made here without ioredis' ready check: in Bun the
 *  check's INFO can go out after the emitter's first SUBSCRIBE, Redis refuses it in subscriber
 *  mode, and the connection never becomes ready (the broker was deaf to other nodes' topics). */
export function redisEmitter(url: string, log: Logger) {
  const pubConn = new Redis(url, { enableAutoPipelining: true, enableReadyCheck: false });
  const subConn = new Redis(url, { enableReadyCheck: false });
  const mq = new (MQEmitterRedis as unknown as new (o: object) => ReturnType<typeof MQEmitterRedis>)({ pubConn, subConn, concurrency: 100 });
  // without a listener an emitter error would end the process
  (mq as unknown as { state: import("node:events").EventEmitter }).state.on("error", (err: Error) => log.warn("cluster: MQTT emitter's Redis link failed", { err: err.message }));
  return mq;
}

export interface ClusterParts {
  db: Db; log: Logger; nodeId: string; bus: ClusterBus; nodes: NodeRegistry;
  signals: Signals; systems: Systems; changes: ChangeRecorder; hub: SyncHub;
  /** the sync hub's way to the edges other nodes hold: attached here */
  elsewhere: Port<ElsewhereHub>;
}

/** How much longer than a control command's own limit a node waits for the holder's answer. */
const CONTROL_MARGIN_MS = 10_000;
const RETRY_TIMEOUT_MS = 15_000;
/** How much longer than a relayed request's limit a node waits for the holder's answer. */
const RELAY_MARGIN_MS = 5_000;

/** A failure as it crosses to another node: its kind and detail, made again there. */
const errorOf = (err: unknown) => ({ error: err instanceof ApiError ? { kind: (Object.keys(ErrorKinds) as ErrorKindName[]).find((k) => ErrorKinds[k] === err.kind) ?? "INTERNAL", message: err.detail } : { kind: "INTERNAL", message: String((err as Error)?.message ?? err) } });
const rethrow = (e: { kind: string; message: string }): never => { throw new ApiError(e.kind in ErrorKinds ? e.kind as ErrorKindName : "INTERNAL", e.message); };

/** Joins this node's parts to the cluster. Call once every part is built, before the node's
 *  signals are closed. */
export function joinCluster(p: ClusterParts) {
  const { bus, hub, log, signals } = p;
  /** set while another node's signal is delivered here: what its listeners emit in turn is not
   *  forwarded again (it would echo between the nodes) */
  let applying = false;

  // what each node caches (tokens, permissions, systems, collections' schemas and write versions,
  // service cache definitions), services and libraries (warm sandboxes), triggers (the
  // dispatcher's index), edge records and templates (the sync hub re-plans, closes a deleted
  // edge's connection): said on one node, heard on every node
  for (const name of Object.keys(SIGNAL_SHARED) as SignalName[]) {
    if (!SIGNAL_SHARED[name]) continue;
    signals.on(name, (payload, remote) => { if (!remote && !applying) bus.send({ kind: "signal", body: { name, payload } }); });
  }
  bus.on("signal", (b: { name: SignalName; payload: SignalPayloads[SignalName] }) => {
    if (!SIGNAL_SHARED[b.name]) return;
    applying = true;
    try { signals.emit(b.name, b.payload as never, true); } finally { applying = false; }
  });

  // after a Redis outage every node may have missed news: drop what could be stale
  bus.onResync(() => {
    void p.systems.keys().then((keys) => {
      for (const systemKey of keys) {
        signals.emit("tokens.systemChanged", { systemKey }); signals.emit("permissions.changed", { systemKey });
        signals.emit("system.changed", { systemKey }); signals.emit("serviceCache.changed", { systemKey, name: null });
        void signals.emit("triggers.changed", { systemKey });
      }
    }).catch((err) => log.warn("cluster: resync failed", { err }));
  });

  // changes committed on any node wake the sessions of the edges they go to, wherever they are
  // (told while the transaction may still be open, which this node's reads wait for but another's
  // do not: sent once it has ended, or the other nodes read the log before the change and their
  // edges had it only at the next catch-up, 5 s later)
  p.changes.onCommitted((sk, assets) => void p.db.settled().then(() => bus.send({ kind: "committed", body: { sk, assets: [...assets] } })));
  bus.on("committed", (b: { sk: string; assets: string[] }) => hub.wake(b.sk, new Set(b.assets)));

  /** The live node holding an edge's connection, other than this one. */
  const holder = async (sk: string, edge: string) => {
    const h = await clusterRepo.holderOf(p.db, sk, edge);
    return h && h.is_connected && h.node_id && h.node_id !== p.nodeId && p.nodes.alive.includes(h.node_id) ? h.node_id : null;
  };
  /** Asks the node holding an edge's link; a node that stops meanwhile (its heartbeats end) fails
   *  the wait as soon as the others know it is dead, not at the request's own limit. */
  class HolderGone extends Error {}
  const askHolder = <T>(node: string, kind: string, body: unknown, timeoutMs: number) => new Promise<T>((resolve, reject) => {
    const watch = setInterval(() => { if (!p.nodes.alive.includes(node)) { clearInterval(watch); reject(new HolderGone()); } }, HEARTBEAT_MS);
    bus.request<T>(node, kind, body, timeoutMs).then((v) => { clearInterval(watch); resolve(v); }, (err) => { clearInterval(watch); reject(err); });
  });
  const holderFailed = (edge: string, node: string, err: unknown) => err instanceof HolderGone
    ? fail("EDGE_OFFLINE", `edge '${edge}' was connected to node ${node}, which stopped before it answered`)
    : fail("EDGE_TIMEOUT", `edge '${edge}' is connected to node ${node}, which did not answer: ${(err as Error).message}`);
  // relayed requests and remote operations: the whole body crosses in one bus message (bounded
  // by BODY_MAX_BYTES; the bus parks a large one under a key), answered by the node holding the
  // edge's link
  type Relayed = { status: number; headers: [string, string][]; body: string } | { error: { kind: string; message: string } } | null;
  const relayElsewhere: ElsewhereHub["relay"] = async (sk, edge, req) => {
    const node = await holder(sk, edge);
    if (!node) return null;
    let r: Relayed;
    try {
      r = await askHolder<Relayed>(node, "edge.relay", { sk, edge, req: { ...req, body: req.body ? Buffer.from(req.body).toString("base64") : null } }, req.timeoutMs + RELAY_MARGIN_MS);
    } catch (err) {
      throw holderFailed(edge, node, err);
    }
    if (!r) return null;
    if ("error" in r) return rethrow(r.error);
    return { status: r.status, headers: r.headers, body: new Blob([Buffer.from(r.body, "base64")]).stream() };
  };
  const opElsewhere: ElsewhereHub["op"] = async (sk, edge, op, timeoutMs) => {
    const node = await holder(sk, edge);
    if (!node) return null;
    let r: { result: unknown } | { error: { kind: string; message: string } } | null;
    try { r = await askHolder(node, "edge.op", { sk, edge, op, timeoutMs }, timeoutMs + RELAY_MARGIN_MS); }
    catch (err) { throw holderFailed(edge, node, err); }
    if (r && "error" in r) return rethrow(r.error);
    return r;
  };
  // (with it attached, the hub leaves an edge it does not hold to its record: the node holding it
  // keeps it, a dead node's edges are freed by the others)
  p.elsewhere.attach({
    control: async (sk, edge, req) => {
      const node = await holder(sk, edge);
      if (!node) return null;
      try {
        return await bus.request<ControlResult | null>(node, "edge.control", { sk, edge, req }, req.timeoutMs + CONTROL_MARGIN_MS);
      } catch (err) {
        return { err: true, command: req.command, output: `edge '${edge}' is connected to node ${node}, which did not answer: ${(err as Error).message}` };
      }
    },
    retry: async (sk, edge, only) => {
      const node = await holder(sk, edge);
      if (!node) return null;
      return bus.request<{ edge: string; connected: boolean; queued: number } | null>(node, "edge.retry", { sk, edge, only }, RETRY_TIMEOUT_MS).catch(() => null);
    },
    relay: relayElsewhere,
    op: opElsewhere,
    // relayed messages: for one edge, to the node holding it; for every edge, to every node
    relayMessage: async (sk, edge, except, text) => {
      if (!edge) { bus.send({ kind: "edge.message", body: { sk, edge, except, text } }); return true; }
      // sent without waiting for an answer, so also to a node this one has not yet seen beat (a
      // node that joined within the last heartbeat): one that died gets nothing and says nothing
      const h = await clusterRepo.holderOf(p.db, sk, edge);
      const node = h?.is_connected && h.node_id && h.node_id !== p.nodeId ? h.node_id : null;
      if (!node) return false;
      bus.send({ kind: "edge.message", to: node, body: { sk, edge, except, text } });
      return true;
    },
  });
  bus.serve("edge.relay", async (b: { sk: string; edge: string; req: Omit<RelayRequest, "body"> & { body: string | null } }): Promise<Relayed> => {
    if (!hub.isConnected(b.sk, b.edge)) return null;
    try {
      const a = await hub.relay(b.sk, b.edge, { ...b.req, body: b.req.body === null ? null : new Uint8Array(Buffer.from(b.req.body, "base64")) });
      const parts: Uint8Array[] = [];
      if (!(await chunked(a.body, BODY_MAX_BYTES, (c) => parts.push(c)))) throw fail("PAYLOAD_TOO_LARGE", `the edge's answer is larger than ${BODY_MAX_BYTES} bytes`);
      return { status: a.status, headers: a.headers, body: Buffer.concat(parts).toString("base64") };
    } catch (err) { return errorOf(err); }
  });
  bus.serve("edge.op", async (b: { sk: string; edge: string; op: EdgeOp; timeoutMs: number }) => {
    if (!hub.isConnected(b.sk, b.edge)) return null;
    try { return { result: await hub.op(b.sk, b.edge, b.op, b.timeoutMs) }; } catch (err) { return errorOf(err); }
  });
  bus.on("edge.message", (b: { sk: string; edge: string; except: string; text: string }) => { hub.deliverHere(b.sk, b.edge, b.except, b.text); });
  bus.serve("edge.control", async (b: { sk: string; edge: string; req: Parameters<SyncHub["control"]>[2] }) =>
    hub.isConnected(b.sk, b.edge) ? hub.control(b.sk, b.edge, b.req) : null);
  bus.serve("edge.retry", async (b: { sk: string; edge: string; only?: { type: string; name: string }[] }) =>
    hub.isConnected(b.sk, b.edge) ? hub.retry(b.sk, b.edge, b.only) : null);
}
