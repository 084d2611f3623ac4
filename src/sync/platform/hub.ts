// The platform's side of edge sync: authenticates edges on the sync channel, brings each to its
// template (a full snapshot when it is new, re-created or further behind than the log reaches; the
// assets a template change added and the removal of those it dropped otherwise), then streams the
// change log filtered by its template; applies rows and messages coming up; keeps per-asset status.
// The hub holds the channel and hands each step to its file: connect (hello, refusals, close),
// admission (hellos at a bounded pace), session (what is sent to one edge), snapshots (full ones
// shared), ack, uplink, relayDown, control, status, compaction.
import { describeIssues } from "../../core/validate.ts";
import { edgesRepo } from "../../store/edges.ts";
import { nowSeconds } from "../../core/ids.ts";
import { clusterRepo } from "../../store/cluster.ts";
import { linkEventsRepo } from "../../store/linkEvents.ts";
import type { ChangeRow } from "../../store/sync.ts";
import { systemsRepo } from "../../store/systems.ts";
import type { ControlResult } from "../../adapters/runner.ts";
import { commonEdgeMessage, EdgeMessage } from "../protocol.ts";
import { entryFor } from "../assets.ts";
import { CHUNK_FRAME, type FilePeer, isFileMessage } from "../files.ts";
import type { EdgeOp, RelayedAnswer } from "../fleet.ts";
import { ack } from "./ack.ts";
import { compact } from "./compaction.ts";
import { close, hello, linkEnded, reject, retemplate, sweep, SWEEP_MS } from "./connect.ts";
import { control, op, relay } from "./control.ts";
import { deliverHere, relayDown } from "./relayDown.ts";
import { EdgeSession } from "./session.ts";
import { templateKey } from "./templateKey.ts";
import { HubState } from "./state.ts";
import { HelloAdmission } from "./admission.ts";
import { connectedEdges, failedAssets, lag, lags, linkMetrics, retry, status } from "./status.ts";
import type { AssetStatus, ControlRequest, HubDeps, RelayRequest, Socket } from "./types.ts";
import { up } from "./uplink.ts";

/** How often, in a cluster, idle sessions look at their log again (a lost signal costs at most this). */
const CATCH_UP_ELSEWHERE_MS = 5_000;
/** How long a change's sends hold the event loop at most before giving it back (ms): the API
 *  and the first edges' acknowledgements are answered between. */
const WAKE_TURN_MS = 10;
const WAKE_FIRST_SLICE = 500, WAKE_MIN_SLICE = 50, WAKE_MAX_SLICE = 4_000;

export { LINK_EVENTS_KEPT } from "../../store/linkEvents.ts";
export type { AssetStatus, ControlRequest, ElsewhereHub, HubDeps, RelayRequest, Socket } from "./types.ts";

export class SyncHub {
  private readonly st: HubState;
  private compactor: ReturnType<typeof setInterval> | null = null;
  private sweeper: ReturnType<typeof setInterval> | null = null;
  private catchUp: ReturnType<typeof setInterval> | null = null;
  private offCommitted: (() => void) | null = null;
  /** each welcomed session as file sync's peer */
  private readonly filePeers = new WeakMap<EdgeSession, FilePeer>();
  /** hellos admitted at a bounded pace */
  private readonly admission = new HelloAdmission();

  constructor(readonly d: HubDeps) {
    const st = this.st = new HubState(d);
    d.signals.on("edge.changed", ({ systemKey: sk, edge, what }) => {
      if (what !== "deleted") this.d.changes.addSystemWithEdges(sk);
      const s = st.sessions.get(`${sk}/${edge}`);
      if (!s) return;
      if (what === "deleted") { st.writes.forget(sk, edge); s.ws.close(4001, "edge deleted"); return; }
      if (what === "template") void retemplate(st, s);
    });
  }

  /** relayed messages for one edge that was connected to no node, or whose link was too far
   *  behind (/metrics) */
  get relayDropped() { return this.st.relayDropped; }

  async start() {
    // the edges this node held before it restarted (other nodes' edges stay theirs)
    await clusterRepo.releaseEdgesOf(this.d.db, this.d.nodeId);
    const keys = (await systemsRepo.all(this.d.db)).map((s) => s.system_key);
    const withEdges: string[] = [];
    for (const k of keys) {
      const edges = await edgesRepo.all(this.d.db, k);
      if (!edges.length) continue;
      withEdges.push(k);
      // the herd of hellos after a restart finds its records here
      this.st.reads.keepEdges(edges);
    }
    this.d.changes.setSystemsWithEdges(withEdges);
    this.offCommitted = this.d.changes.onCommitted((sk, assets) => this.wake(sk, assets));
    this.d.edgeLinks.attach({
      // read for records read after a settle (Edges.get, list): no write per record of a list
      lagOf: (sk, edge) => lag(this.st, sk, edge),
      lagsOf: (sk, rows) => lags(this.st, sk, rows),
      // in a cluster, an edge this node does not hold: its record says (the node holding it keeps it)
      liveOf: (sk, edge) => (this.isConnected(sk, edge) ? true : this.st.elsewhere ? null : false),
      skewOf: (sk, edge) => this.st.skews.get(`${sk}/${edge}`) ?? null,
      settle: () => this.st.writes.flush(),
    });
    // a named template that cannot be used gives its edges nothing: said at start, not only when assigned
    for (const problem of this.d.edges.namedTemplateProblems()) this.d.log.warn("a named edge template cannot be used", { problem });
    this.compactor = setInterval(() => this.compact().catch((err) => this.d.log.warn("change log compaction failed", { err })), this.d.compactMs);
    this.compactor.unref();
    this.sweeper = setInterval(() => sweep(this.st), SWEEP_MS);
    this.sweeper.unref();
    this.catchUp = setInterval(() => this.catchUpElsewhere(), CATCH_UP_ELSEWHERE_MS);
    this.catchUp.unref();
  }

  /** In a cluster, another node's commits reach this one as signals over Redis, which a reconnect
   *  can lose: every idle session looks at its system's log again now and then. One shared read
   *  per position and system (logAfter), so a fleet at one position costs one query. */
  private catchUpElsewhere() {
    if (!this.st.elsewhere) return;
    for (const [sk, sessions] of this.st.bySystem) {
      this.st.logMoved(sk);
      for (const s of sessions) if (!s.awaiting && !s.pumping) void s.pump();
    }
  }

  async stop() {
    this.st.beginStop();
    if (this.compactor) clearInterval(this.compactor);
    if (this.sweeper) clearInterval(this.sweeper);
    if (this.catchUp) clearInterval(this.catchUp);
    this.offCommitted?.();
    for (const s of this.st.sessions.values()) { linkEnded(this.st, s, "platform stopping"); s.closed = true; s.ws.close(1001, "platform stopping"); }
    this.st.sessions.clear();
    this.st.bySystem.clear();
    // the closes of links the listener ended before this (it stops first) are still writing: the
    // database must outlive them (a fleet's closes used the pool after it ended, one failure each)
    await Promise.allSettled([...this.st.closing]);
    // what the edges acknowledged and when they were heard from is kept across a clean stop
    await this.st.writes.flush();
    // and the edges this node held are disconnected, in one statement rather than one each
    await clusterRepo.releaseEdgesOf(this.d.db, this.d.nodeId, nowSeconds());
  }

  /** New changes of these assets are in a system's log (committed here or on another node):
   *  the sessions of edges they go to send them. */
  wake(sk: string, assets: ReadonlySet<string>) {
    this.st.logMoved(sk);
    const sessions = this.st.bySystem.get(sk);
    if (sessions?.size) void this.wakeInSlices([...sessions], assets);
  }

  /** The sessions' sends, the event loop given back every WAKE_TURN_MS: one burst of thousands
   *  of sends held the API and the first edges' acknowledgements (slices of a fixed 2,000 sends
   *  still held /health for about 100 ms each at 10,000 edges). */
  private async wakeInSlices(sessions: EdgeSession[], assets: ReadonlySet<string>) {
    // the first pumps send after the shared read's await (the rest at once, see pump), so a
    // slice's cost shows only once the loop comes back: each is sized from how long the last took
    let slice = WAKE_FIRST_SLICE;
    // whether the change goes to an edge depends on its template alone: asked once per template
    const byTemplate = new Map<string, boolean>();
    const wants = (s: EdgeSession) => {
      const k = templateKey(s.template);
      let w = byTemplate.get(k);
      if (w === undefined) byTemplate.set(k, w = s.wants(assets));
      return w;
    };
    for (let i = 0; i < sessions.length;) {
      const t0 = performance.now(), end = Math.min(sessions.length, i + slice);
      for (; i < end; i++) { const s = sessions[i]!; if (wants(s)) void s.pump(); else s.later(); }
      if (i === sessions.length) break;
      await new Promise((r) => setImmediate(r));
      const took = performance.now() - t0;
      slice = Math.max(WAKE_MIN_SLICE, Math.min(WAKE_MAX_SLICE, Math.round(slice * WAKE_TURN_MS / Math.max(took, 0.1))));
    }
  }

  /** A log entry as the text a batch carries (its body is stored as JSON already). */
  wireText(r: ChangeRow): string { return this.st.wireText(r); }

  // ---- the channel ----------------------------------------------------------------------------

  open(ws: Socket) { this.st.bySocket.set(ws, new EdgeSession(this.st, ws)); }

  /** A welcomed session as file sync's peer (made once). */
  private filePeer(s: EdgeSession, ws: Socket): FilePeer | undefined {
    if (!this.d.files || !s.edge) return undefined;
    let peer = this.filePeers.get(s);
    if (!peer) {
      peer = { systemKey: s.edge.system_key, edge: s.edge.name, send: (x) => s.send(x), sendBinary: (b) => { if (!s.closed) ws.sendBinary?.(b); } };
      this.filePeers.set(s, peer);
    }
    return peer;
  }

  async message(ws: Socket, raw: unknown) {
    const s = this.st.bySocket.get(ws);
    if (!s || s.closed) return;
    s.lastHeard = Date.now();
    // file bytes come in binary frames (JSON ones start with '{')
    const bytes = raw instanceof Uint8Array ? raw : raw instanceof ArrayBuffer ? new Uint8Array(raw) : null;
    if (bytes?.[0] === CHUNK_FRAME) {
      const peer = this.filePeers.get(s);
      if (peer) this.d.files?.chunk(peer, bytes);
      return;
    }
    let json: unknown = raw;
    if (typeof raw === "string") { try { json = JSON.parse(raw); } catch { return reject(s, "not JSON"); } }
    else if (raw instanceof Uint8Array || raw instanceof ArrayBuffer) { try { json = JSON.parse(Buffer.from(raw as Uint8Array).toString("utf8")); } catch { return reject(s, "not JSON"); } }
    let m = commonEdgeMessage(json);
    if (!m) {
      const parsed = EdgeMessage.safeParse(json);
      if (!parsed.success) return reject(s, describeIssues(parsed.error, "message"));
      m = parsed.data;
    }
    try {
      if (m.t === "hello") {
        const h = m;
        return await this.admission.admit(s, async () => {
          if (s.closed) return;
          if (this.st.stopping) { s.closed = true; s.ws.close(1001, "platform stopping"); return; }
          await hello(this.st, s, h);
          // (a refused hello leaves no edge on the session)
          const peer = !s.closed && s.edge && this.st.sessions.get(s.key) === s ? this.filePeer(s, ws) : undefined;
          if (peer) this.d.files?.peerUp(peer);
        });
      }
      // (sent before its hello was admitted: after it, as before the hello admitted at once)
      const waiting = s.edge ? undefined : this.admission.pending(s);
      if (waiting) await waiting.catch(() => {});
      if (!s.edge) return reject(s, "say hello first");
      if (isFileMessage(m)) {
        // (the edge may offer a file as soon as it is welcomed, before hello's end here)
        const peer = this.filePeer(s, ws);
        // an edge sends files only of the sets its template brings it
        if (peer && m.t === "file_offer" && !entryFor(s.template, "bucketset", m.set)) return s.send({ t: "file_failed", id: m.id, error: `bucket set '${m.set}' is not in this edge's template` });
        if (peer) await this.d.files?.message(peer, m);
        return;
      }
      if (m.t === "ack") return await ack(this.st, s, m);
      if (m.t === "up") return await up(this.st, s, m);
      if (m.t === "ping") {
        s.send({ t: "pong" });
        if (m.outbox !== undefined) s.outbox = m.outbox;
        this.st.writes.talked(s);
        // entries that go to no edge of this one's template were not woken for: pass over them now
        await s.pump();
      }
      if (m.t === "control_result") { const done = s.controls.get(m.id); s.controls.delete(m.id); done?.({ err: m.err, command: m.command, output: m.output }); }
      if (m.t === "response") s.relays.get(m.id)?.head(m.status, m.headers);
      if (m.t === "response_body") {
        const sink = s.relays.get(m.id);
        if (sink && (!sink.chunk(m.chunk) || m.end)) {
          if (m.cut) sink.cut(); else sink.end();
          s.relays.delete(m.id);
          if (!m.end) s.send({ t: "request_cancel", id: m.id });
        }
      }
      if (m.t === "op_result") { const done = s.ops.get(m.id); s.ops.delete(m.id); done?.(m); }
    } catch (err) {
      this.d.log.error("sync message failed", { edge: s.edge ? s.key : "?", err });
      s.endCause ||= "error on the platform";
      ws.close(1011, "sync error");
    }
  }

  close(ws: Socket, code?: number, reason?: string) {
    const s = this.st.bySocket.get(ws), peer = s && this.filePeers.get(s);
    if (peer) { this.filePeers.delete(s); void this.d.files?.peerLost(peer); }
    const closing = close(this.st, ws, code, reason);
    this.st.closing.add(closing);
    return closing.finally(() => this.st.closing.delete(closing));
  }

  // ---- relay to edges, requests to one edge -----------------------------------------------------

  /** See relayDown.ts; every publish on the platform comes here, most leave at once. */
  relayDown(sk: string, topic: string, payload: Buffer, qos: number, from = ""): Promise<void> | undefined { return relayDown(this.st, sk, topic, payload, qos, from); }
  deliverHere(sk: string, edge: string, except: string, text: string): boolean { return deliverHere(this.st, sk, edge, except, text); }
  control(sk: string, edge: string, req: ControlRequest): Promise<ControlResult> { return control(this.st, sk, edge, req); }
  relay(sk: string, edge: string, req: RelayRequest): Promise<RelayedAnswer> { return relay(this.st, sk, edge, req); }
  op(sk: string, edge: string, edgeOp: EdgeOp, timeoutMs: number): Promise<unknown> { return op(this.st, sk, edge, edgeOp, timeoutMs); }

  // ---- status ---------------------------------------------------------------------------------

  linkMetrics() { return linkMetrics(this.st); }
  connectedEdges() { return connectedEdges(this.st); }
  failedAssets() { return failedAssets(this.st); }
  /** A live session, not a stored flag: a silent link ends the session (see sweep). */
  isConnected(sk: string, edge: string) { return this.st.sessions.has(`${sk}/${edge}`); }
  async lag(sk: string, edgeName: string): Promise<number | null> { await this.st.writes.flush(); return lag(this.st, sk, edgeName); }
  /** Every asset of the edge's template, then the files moving to and from it (newest first). */
  async status(sk: string, edgeName: string): Promise<AssetStatus[]> {
    await this.st.writes.flush();
    const assets = await status(this.st, sk, edgeName);
    const files = (await this.d.files?.status(sk, edgeName)) ?? [];
    return [...assets, ...files.map((f) => ({ ...f, desired_version: 0, applied_version: 0, attempts: 0, source: "", entry: "" }))];
  }
  retry(sk: string, edgeName: string, only?: { type: string; name: string }[]) { return retry(this.st, sk, edgeName, only); }
  /** The edge's latest link events, newest first (this node's waiting ones written first; another
   *  node's are at most a batch late). */
  async linkLog(sk: string, edgeName: string, limit: number): Promise<{ time: string; event: string; detail: Record<string, unknown> }[]> {
    await this.st.writes.flush();
    return (await linkEventsRepo.latest(this.d.db, sk, edgeName, limit)).map((e) => ({ time: e.time, event: e.event, detail: JSON.parse(e.detail) as Record<string, unknown> }));
  }
  compact() { return compact(this.st); }
}
