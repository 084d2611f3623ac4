// The edge's side of sync: connects to its platform (reconnecting with backoff and jitter),
// applies snapshots and changes (each batch together with the cursor in one transaction, each
// asset in its own savepoint so one that fails is reported and the rest still apply), and sends
// the outbox (rows of collections that flow up, relayed messages) until the platform acknowledges it.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config.ts";
import type { EventBus } from "../core/events.ts";
import type { Logger } from "../core/log.ts";
import type { UpstreamVerdict } from "../domain/developers.ts";
import { type CompileCheck, problemText } from "../domain/services.ts";
import type { TemplateEntry } from "../domain/edges.ts";
import type { Db, Executor } from "../store/db.ts";
import { collectionsRepo } from "../store/collections.ts";
import { developersRepo } from "../store/developers.ts";
import { outboxRepo, snapshotSeenRepo, syncedAssetsRepo, syncStateRepo, tombstonesRepo } from "../store/sync.ts";
import { systemsRepo, type SystemRow } from "../store/systems.ts";
import { adaptersRepo } from "../store/adapters.ts";
import { adapterBody, controlFiles } from "../domain/adapters.ts";
import { BUILD } from "../version.ts";
import { AdapterRunner } from "../adapters/runner.ts";
import { applyDefinition, applyRows, entryFor, relayFilters, upCollections } from "./assets.ts";
import { isDefinitionType, KINDS } from "./kinds.ts";
import type { AssetType, ChangeRecorder, RowChange } from "../domain/changes.ts";
import { BATCH_BYTES, CLAIMED_PROTOCOL, type PlatformMessage, PROTOCOL_REFUSED_CLOSE, protocolRefusal, type RefusalReason, SYNC_PATH, type WireChange } from "./protocol.ts";
import { proxyFor } from "./proxy.ts";
import { FLEET_FEATURE } from "./fleet.ts";
import type { FleetAgent } from "./fleetAgent.ts";
import { publishable } from "./relay.ts";

export interface EdgeSyncDeps {
  db: Db; config: Config; log: Logger; events: EventBus; changes: ChangeRecorder;
  /** caches to drop after assets of a system changed underneath them */
  invalidate(systemKey: string, types: Set<string>, collections: Set<string>): void;
  /** compiles code as the engine would load it: a service or library that does not compile is
   *  not applied, and reported failed (it may come from an older platform, which did not check) */
  compileCheck?: CompileCheck;
  /** runs the requests and remote operations the platform relays (fleet control) */
  fleet?: FleetAgent;
  /** publishes a message the platform relayed to this edge on its broker, as from the platform
   *  (so it is not relayed up again) */
  deliver?(topic: string, payload: Buffer, qos: 0 | 1 | 2): Promise<void>;
}

/** Reconnect delays: doubling from the least to the most, each a random part of it (so a fleet
 *  does not come back all at once), back to the least after a welcome. The most is small so a
 *  healed link is used again within seconds. */
const BACKOFF_MIN_MS = 250;
const BACKOFF_MAX_MS = 2_000;
/** Longest wait for the socket to open (a dead route never refuses: it says nothing). */
const OPEN_TIMEOUT_MS = 3_000;
/** Most items and about the most bytes sent up at once. */
const OUTBOX_BATCH = 500;
const OUTBOX_READ = 100;
/** Longest an edge waits for the platform to check a developer's password. */
const VERIFY_TIMEOUT_MS = 5_000;
/** How often the outbox is held to its bounds (--outbox-max-mb, --outbox-max-age). */
const OUTBOX_CHECK_MS = 1_000;
/** How long an edge waits before trying again a platform that refused its protocol version. */
const REFUSED_RETRY_MS = 60_000;

export class EdgeSync {
  private ws: WebSocket | null = null;
  private stopped = false;
  private backoff = BACKOFF_MIN_MS;
  private timer: ReturnType<typeof setTimeout> | null = null;
  /** checks the link of the current socket: opened in time, welcomed in time, not silent */
  private watchdog: ReturnType<typeof setInterval> | null = null;
  private lastHeard = 0;
  private lastPing = 0;
  private readonly pingMs: number;
  /** a welcome came since the process started (the next hello is not the first) */
  private welcomed = false;
  private upInflight = false;
  private applying: Promise<void> = Promise.resolve();
  private template: TemplateEntry[] = [];
  connected = false;
  /** ms timestamps, for tests and the status page */
  lastConnectedAt = 0;
  appliedBatches = 0;
  private readonly systemKey: string;
  readonly adapters: AdapterRunner;
  /** when the platform was last heard from (ms; 0: never since start) */
  lastContactAt = 0;
  /** the CA bundle an https:// platform's certificate is checked against (--platform-ca) */
  private readonly tls: { ca: string } | undefined;
  /** the proxy the platform is reached through (HTTPS_PROXY / HTTP_PROXY, unless NO_PROXY) */
  private readonly proxy: string | undefined;
  /** the outbox's size in bytes as last measured, plus what went in since, less what went up */
  private outboxBytes = 0;
  /** bytes of the batch waiting for the platform's acknowledgement */
  private inflightBytes = 0;
  private outboxTimer: ReturnType<typeof setInterval> | null = null;
  private trimming = false;
  /** outbox items dropped past its bounds since the process started (/metrics) */
  outboxDropped = 0;
  /** why the platform (or this edge) refused the link ("" : it did not): a wrong name or token, a
   *  sync protocol or version the other side does not serve */
  refusal = "";
  /** what kind of refusal it was: an incompatible peer is tried again only after a while */
  private refusalReason: RefusalReason | "" = "";
  /** how reaching the platform fails, while it does: the latest cause, since when, how many tries
   *  (null: the last try was welcomed) */
  linkFailure: { cause: LinkCause; message: string; since: number; last: number; attempts: number } | null = null;
  /** the failure last logged, when, and the tries counted then (failures are logged at once, and
   *  the same one again only once per --sync-log-ms) */
  private linkLogged = { key: "", at: 0, attempts: 0 };
  /** why each socket's try failed, as far as it said (the error event comes before the close);
   *  `byEdge`: this edge refused the platform (its protocol) */
  private readonly failureOf = new WeakMap<WebSocket, { cause: LinkCause; message: string; byEdge?: boolean; platformBuild?: string }>();
  /** a full snapshot is coming or under way: the platform's clock at its welcome (rows stamped
   *  before it that the snapshot does not bring go at its end) */
  private fullSince: string | null = null;
  /** rows of the batch waiting for the platform's acknowledgement (a full snapshot keeps them) */
  private inflightRows: { collection_id: string; item_id: string }[] = [];

  constructor(private readonly d: EdgeSyncDeps) {
    this.systemKey = d.config.systemKey!;
    this.pingMs = d.config.syncPingMs;
    this.tls = d.config.platformCa ? { ca: readPem(d.config.platformCa) } : undefined;
    this.proxy = proxyFor(d.config.platformUrl!, process.env);
    this.adapters = new AdapterRunner(d.config.adaptersDir ?? join(d.config.dataDir, "adapters"), { user: d.config.adaptersUser, dataDir: d.config.dataDir });
  }

  async start() {
    const t = await syncStateRepo.get(this.d.db, "template");
    if (t) this.useTemplate(JSON.parse(t) as TemplateEntry[]);
    // rows written before the platform answers (or while it is unreachable) must reach the outbox too
    await this.refreshUpCollections();
    this.d.changes.onCommitted((sk) => { if (sk === this.systemKey) void this.sendOutbox(); });
    this.outboxBytes = await outboxRepo.bytes(this.d.db);
    await snapshotSeenRepo.ensure(this.d.db);
    this.outboxTimer = setInterval(() => { void this.trimOutbox().catch((err) => this.d.log.warn("outbox bounds not checked", { err })); }, OUTBOX_CHECK_MS);
    this.outboxTimer.unref?.();
    this.connect();
  }

  stop() {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.watchdog) clearInterval(this.watchdog);
    if (this.outboxTimer) clearInterval(this.outboxTimer);
    this.ws?.close(1000, "edge stopping");
  }

  /** Asks the platform whether a developer's password is right (see Developers.authenticate). */
  async verifyDeveloper(email: string, password: string): Promise<UpstreamVerdict> {
    const base = this.d.config.platformUrl!.replace(/\/$/, "");
    try {
      const r = await fetch(`${base}/admin/auth`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ email, password }), signal: AbortSignal.timeout(VERIFY_TIMEOUT_MS), tls: this.tls, proxy: this.proxy });
      if (r.status === 429) return { verdict: "throttled", retryAfterS: Number(r.headers.get("retry-after")) || 60 };
      if (r.status >= 500) return { verdict: "unreachable", why: `the platform answered ${r.status}` };
      if (r.status !== 200) return { verdict: "refused" };
      const b = (await r.json()) as { user_id?: unknown; dev_token?: unknown };
      // the platform session it opened is not needed here
      if (typeof b.dev_token === "string") void fetch(`${base}/admin/logout`, { method: "POST", headers: { "ClearBlade-DevToken": b.dev_token }, signal: AbortSignal.timeout(VERIFY_TIMEOUT_MS), tls: this.tls, proxy: this.proxy }).catch(() => {});
      return typeof b.user_id === "string" ? { verdict: "accepted", id: b.user_id } : { verdict: "refused" };
    } catch (err) {
      return { verdict: "unreachable", why: String((err as Error)?.message ?? err) };
    }
  }

  private url() {
    const u = new URL(this.d.config.platformUrl!);
    u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
    u.pathname = SYNC_PATH;
    return u.toString();
  }

  private connect() {
    if (this.stopped) return;
    let ws: WebSocket;
    try { ws = new WebSocket(this.url(), this.tls || this.proxy ? { ...(this.tls ? { tls: this.tls } : {}), ...(this.proxy ? { proxy: this.proxy } : {}) } : undefined); }
    catch (err) { this.attemptFailed(linkCause(err, this.d.config.platformUrl!)); this.retry(); return; }
    this.ws = ws;
    const started = Date.now();
    let opened = false;
    this.lastHeard = started;
    this.watch(ws, () => opened, started);
    ws.onopen = async () => {
      opened = true;
      this.lastHeard = Date.now();
      // a batch of an earlier socket still being applied moves the cursor first
      await this.applying;
      if (this.ws !== ws) return;
      const cursor = Number((await syncStateRepo.get(this.d.db, "cursor")) ?? "0");
      const failures = Object.values(await this.failures(this.d.db));
      const synced = (await syncStateRepo.get(this.d.db, "snapshot")) === "done";
      const incarnation = (await syncStateRepo.get(this.d.db, "incarnation")) ?? "";
      this.send(ws, { t: "hello", systemKey: this.systemKey, edge: this.d.config.edgeName, token: this.d.config.edgeToken, cursor, version: BUILD, os: process.platform, arch: process.arch, failures, synced,
        incarnation, fresh: !this.welcomed, pingMs: this.pingMs, hlc: this.d.changes.clock.now(), time: Date.now(), protocol: CLAIMED_PROTOCOL, outbox: await this.outboxSize(),
        features: this.d.fleet ? [FLEET_FEATURE] : [] });
    };
    ws.onmessage = (ev) => {
      this.lastContactAt = Date.now();
      this.lastHeard = Date.now();
      let m: PlatformMessage;
      try { m = JSON.parse(typeof ev.data === "string" ? ev.data : Buffer.from(ev.data as ArrayBuffer).toString("utf8")) as PlatformMessage; }
      catch { return; }
      // adapter commands run beside sync, so a long one does not hold up changes
      if (m.t === "control") { void this.control(ws, m); return; }
      // so do relayed requests and remote operations
      if (this.d.fleet?.handle(m, (x) => this.send(ws, x))) return;
      // relayed messages are live traffic: not held up behind a batch being applied
      if (m.t === "relay") { this.relayed(m); return; }
      // messages are handled one after another, in order
      this.applying = this.applying.then(() => this.handle(ws, m)).catch((err) => {
        this.d.log.error("sync message failed", { err });
        ws.close(1011, "sync error");
      });
    };
    ws.onclose = (ev) => this.lost(ws, `closed (${ev.code}${ev.reason ? ` ${ev.reason}` : ""})`);
    // onclose follows; the error says why the socket did not open (DNS, TCP, TLS, HTTP)
    ws.onerror = (ev) => { if (!opened && !this.failureOf.has(ws)) this.failureOf.set(ws, linkCause((ev as ErrorEvent).error ?? ev, this.d.config.platformUrl!)); };
  }

  /** Watches a socket: it must open within OPEN_TIMEOUT_MS, be welcomed within two ping periods,
   *  and then never be silent for two ping periods (the platform answers every ping). A link that
   *  dropped without closing is given up and made again. */
  private watch(ws: WebSocket, opened: () => boolean, started: number) {
    if (this.watchdog) clearInterval(this.watchdog);
    this.lastPing = 0;
    this.watchdog = setInterval(() => {
      if (this.ws !== ws) return;
      const now = Date.now();
      const dead = !opened() ? now - started > OPEN_TIMEOUT_MS : now - this.lastHeard > 2 * this.pingMs;
      if (dead) {
        // a try that did not get through is reported with the others (attemptFailed); a link that
        // was up and went silent is said at once
        if (this.connected) this.d.log.warn("sync link silent, reconnecting", { silentMs: now - this.lastHeard });
        else if (!this.failureOf.has(ws)) this.failureOf.set(ws, opened()
          ? { cause: "timeout", message: `the platform did not answer the sync hello within ${Math.round((now - started) / 1000)} s` }
          : { cause: "timeout", message: `${hostOf(this.d.config.platformUrl!)} did not answer within ${OPEN_TIMEOUT_MS / 1000} s (a firewall or a dead route may drop the connection)` });
        ws.terminate();
        this.lost(ws, "silent");
        return;
      }
      if (this.connected && now - this.lastPing >= this.pingMs) {
        this.lastPing = now;
        // with the outbox's size, which the platform shows on its /metrics
        void this.outboxSize().then((outbox) => this.send(ws, { t: "ping", outbox }), () => this.send(ws, { t: "ping" }));
      }
    }, Math.max(50, Math.min(1_000, Math.floor(this.pingMs / 4))));
    this.watchdog.unref?.();
  }

  /** The socket is gone (closed, or given up as silent): reconnect. */
  private lost(ws: WebSocket, why: string) {
    if (this.ws !== ws) return;
    this.ws = null;
    if (this.watchdog) { clearInterval(this.watchdog); this.watchdog = null; }
    this.upInflight = false;
    if (this.connected) {
      this.connected = false;
      this.d.events.emit("StartConnectDisconnect::PlatformDisconnectedOnEdge", this.systemKey, {});
      this.d.log.warn("platform disconnected", { why });
    } else this.attemptFailed(this.failureOf.get(ws) ?? { cause: "closed", message: `the link ${why} before the platform welcomed the edge` });
    this.retry();
  }

  /** Reconnects after a growing, jittered delay (so a fleet does not come back all at once). */
  private retry() {
    if (this.stopped) return;
    // a platform that refused this edge's protocol or version will not take it a second later (a
    // refused token may be put right on the platform at any time)
    const incompatible = this.refusalReason === "protocol" || this.refusalReason === "version";
    const delay = incompatible ? REFUSED_RETRY_MS : this.backoff * (0.5 + Math.random() / 2);
    this.backoff = Math.min(BACKOFF_MAX_MS, this.backoff * 2);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  private send(ws: WebSocket, m: unknown) { if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(m)); }

  private useTemplate(t: TemplateEntry[]) {
    this.template = t;
    this.d.changes.useTemplate(null, relayFilters(t));
  }

  private async refreshUpCollections() {
    const names = (await collectionsRepo.list(this.d.db, this.systemKey)).map((c) => c.name);
    this.d.changes.useTemplate(new Set(upCollections(this.template, names)), null);
  }

  private async handle(ws: WebSocket, m: PlatformMessage) {
    switch (m.t) {
      case "welcome": {
        if (this.ws !== ws) return;
        const refusal = protocolRefusal(m.protocol ?? 1, "platform");
        if (refusal) {
          this.refused(ws, "protocol", refusal, true, m.version);
          // the reason goes with the close, so the platform can log and show it
          ws.close(PROTOCOL_REFUSED_CLOSE, refusal.slice(0, 120));
          return;
        }
        this.refusal = "";
        this.refusalReason = "";
        if (this.linkFailure) this.d.log.info("the platform is reachable again", { after: this.linkFailure.attempts, lastCause: this.linkFailure.cause, failingForS: Math.round((Date.now() - this.linkFailure.since) / 1000) });
        this.linkFailure = null;
        this.linkLogged = { key: "", at: 0, attempts: 0 };
        await this.d.db.tx(async (tx) => {
          // another incarnation of this edge's record (deleted and made again): what this one
          // knows of the old one's position counts for nothing; the platform sends a full snapshot
          const held = (await syncStateRepo.get(tx, "incarnation")) ?? "";
          if (m.incarnation && held && held !== m.incarnation) {
            await syncStateRepo.set(tx, "cursor", "0");
            await syncStateRepo.set(tx, "snapshot", "");
            await syncStateRepo.set(tx, "failures", "{}");
            this.d.log.warn("the platform holds another incarnation of this edge: starting over", { was: held, now: m.incarnation });
          }
          if (m.incarnation) await syncStateRepo.set(tx, "incarnation", m.incarnation);
          await developersRepo.putProfile(tx, m.owner);
          await systemsRepo.put(tx, m.system as unknown as SystemRow);
          await syncStateRepo.set(tx, "template", JSON.stringify(m.template));
          await syncStateRepo.set(tx, "template_name", m.templateName ?? "");
          this.d.changes.clock.observe(m.hlc);
          await this.d.changes.saveClock(tx);
        });
        this.useTemplate(m.template);
        await this.refreshUpCollections();
        this.d.invalidate(this.systemKey, new Set(["system"]), new Set());
        // a full snapshot (again, if one was interrupted) notes the rows it brings from the start
        this.fullSince = m.snapshot && m.hlc ? m.hlc : null;
        if (this.fullSince) await snapshotSeenRepo.clear(this.d.db);
        this.connected = true;
        this.welcomed = true;
        this.lastConnectedAt = Date.now();
        this.backoff = BACKOFF_MIN_MS;
        this.d.events.emit("StartConnectDisconnect::PlatformConnectedOnEdge", this.systemKey, {});
        this.d.log.info("connected to the platform", { snapshot: m.snapshot, seq: m.seq, platform: m.version ?? "" });
        void this.sendOutbox();
        return;
      }
      case "batch": return this.applyBatch(ws, m);
      case "snapshot_end": return this.endSnapshot(ws, m);
      case "template": {
        await syncStateRepo.set(this.d.db, "template", JSON.stringify(m.template));
        await syncStateRepo.set(this.d.db, "template_name", m.templateName ?? "");
        this.useTemplate(m.template);
        await this.refreshUpCollections();
        return;
      }
      case "up_ack": {
        // the platform has these now: a full snapshot that read their rows before keeps them
        if (this.fullSince) for (const [id, rows] of groupBy(this.inflightRows)) await snapshotSeenRepo.add(this.d.db, id, rows);
        this.inflightRows = [];
        await outboxRepo.ackUpTo(this.d.db, m.upTo);
        this.outboxBytes = Math.max(0, this.outboxBytes - this.inflightBytes);
        this.inflightBytes = 0;
        this.upInflight = false;
        void this.sendOutbox();
        return;
      }
      case "error": {
        // a platform that does not say what kind of refusal it is: its message does
        const reason = m.reason ?? (/sync protocol/.test(m.message) ? "protocol" : /token|unknown edge/.test(m.message) ? "credentials" : "message");
        this.refused(ws, reason, m.message);
        return;
      }
      case "pong": return;
    }
  }

  /** The platform refused the link (or this edge refused the platform's protocol): the socket's
   *  try failed for that reason (logged as the socket closes, see attemptFailed). */
  private refused(ws: WebSocket, reason: RefusalReason, message: string, byEdge = false, platformBuild?: string) {
    this.refusal = message;
    this.refusalReason = reason;
    this.failureOf.set(ws, { cause: "refused", message: reason === "credentials" ? `the platform refused this edge's name or token: ${message}` : message, byEdge, platformBuild });
  }

  /** A try to reach the platform failed: counted, and logged with its cause at once, then the same
   *  failure only once per --sync-log-ms (with the tries in between), a new one at once. */
  private attemptFailed({ byEdge, platformBuild, ...f }: { cause: LinkCause; message: string; byEdge?: boolean; platformBuild?: string }) {
    const now = Date.now();
    if (f.cause !== "refused") { this.refusal = ""; this.refusalReason = ""; }
    const l = this.linkFailure = this.linkFailure ? { ...this.linkFailure, ...f, last: now, attempts: this.linkFailure.attempts + 1 } : { ...f, since: now, last: now, attempts: 1 };
    const key = `${f.cause}\u0000${f.message}`;
    if (key === this.linkLogged.key && now - this.linkLogged.at < this.d.config.syncLogMs) return;
    const fields = { cause: f.cause, message: f.message, url: this.d.config.platformUrl, ...(platformBuild ? { platform: platformBuild } : {}), attempts: l.attempts,
      failingForS: Math.round((now - l.since) / 1000), ...(this.linkLogged.key ? { attemptsSinceLastLine: l.attempts - this.linkLogged.attempts } : {}) };
    if (f.cause === "refused") this.d.log.error(byEdge ? "the platform's sync protocol is not one this edge speaks" : "the platform refused the edge", fields);
    else this.d.log.warn("cannot reach the platform", fields);
    this.linkLogged = { key, at: now, attempts: l.attempts };
  }

  /** An adapter control command from the platform; the answer goes back on the same channel. */
  private async control(ws: WebSocket, m: Extract<PlatformMessage, { t: "control" }>) {
    const r = await this.adapters.control(m.adapter, m.command, m.files, m.timeoutMs)
      .catch((err) => ({ err: true, command: m.command, output: String((err as Error)?.message ?? err) }));
    this.send(ws, { t: "control_result", id: m.id, ...r });
  }

  /** A message relayed to this edge (its suffix named it, or every edge): published here on its topic. */
  private relayed(m: Extract<PlatformMessage, { t: "relay" }>) {
    if (typeof m.topic !== "string" || typeof m.payload !== "string" || !publishable(m.topic)) return;
    const qos = m.qos === 1 || m.qos === 2 ? m.qos : 0;
    void this.d.deliver?.(m.topic, Buffer.from(m.payload, "base64"), qos).catch((err) => this.d.log.warn("relayed message not published", { topic: m.topic, err }));
  }

  /** A deployed adapter whose files changed through sync gets the new versions on disk. */
  private async redeploy(names: Set<string>) {
    for (const name of names) {
      try {
        const a = this.adapters.deployed(name) ? await adaptersRepo.get(this.d.db, this.systemKey, name) : null;
        if (a) this.adapters.writeFiles(name, controlFiles(await adapterBody(this.d.db, a)));
      } catch (err) {
        this.d.log.warn("adapter files not rewritten", { adapter: name, err });
      }
    }
  }

  /** Assets whose last application failed, by type and name (kept until they apply). */
  private async failures(ex: Executor): Promise<Record<string, AssetResult & { error: string }>> {
    return JSON.parse((await syncStateRepo.get(ex, "failures")) ?? "{}");
  }

  private async noteFailures(tx: Executor, results: AssetResult[]) {
    if (!results.length) return;
    const f = await this.failures(tx);
    let changed = false;
    for (const r of results) {
      const k = `${r.type}\u0000${r.name}`;
      if (r.error) { f[k] = { type: r.type, name: r.name, seq: r.seq, ...(r.version ? { version: r.version } : {}), error: r.error }; changed = true; }
      else if (f[k]) { delete f[k]; changed = true; }
    }
    if (changed) await syncStateRepo.set(tx, "failures", JSON.stringify(f));
  }

  /** One batch: every change in its own savepoint, the cursor with them, one transaction. */
  private async applyBatch(ws: WebSocket, m: Extract<PlatformMessage, { t: "batch" }>) {
    const results: AssetResult[] = [];
    const types = new Set<string>(), collections = new Set<string>(), adapters = new Set<string>();
    // compiled before the transaction, which holds the edge's database writer while it lasts
    const notCompiling = await this.notCompiling(m.changes);
    await this.d.db.tx(async (tx) => {
      // rows of one collection in a batch are applied together (last writer wins)
      const rowGroups = new Map<string, RowChange[]>();
      const rowSeq = new Map<string, number>(), rowVersion = new Map<string, number>();
      for (const ch of m.changes) {
        this.d.changes.clock.observe(ch.hlc);
        if (ch.type === "row") {
          const body = ch.body as RowChange;
          (rowGroups.get(body.collection_id) ?? rowGroups.set(body.collection_id, []).get(body.collection_id)!).push(body);
          rowSeq.set(body.collection_id, Math.max(rowSeq.get(body.collection_id) ?? 0, ch.seq));
          if (ch.version) rowVersion.set(body.collection_id, Math.max(rowVersion.get(body.collection_id) ?? 0, ch.version));
          continue;
        }
        const error = await this.savepoint(tx, async () => {
          const problem = notCompiling.get(ch);
          if (problem) throw new Error(problem);
          await applyDefinition(tx, this.systemKey, ch);
          if (ch.op === "delete") await syncedAssetsRepo.remove(tx, ch.type, ch.name);
          else await syncedAssetsRepo.add(tx, ch.type, ch.name);
        });
        types.add(ch.type);
        if (ch.type === "collection") collections.add((ch.body as { collection_id: string }).collection_id);
        if (ch.type === "adapter" && !error) adapters.add(ch.name);
        results.push({ type: ch.type, name: ch.name, seq: ch.seq, ...(ch.version ? { version: ch.version } : {}), ...(error ? { error } : {}) });
      }
      for (const [id, rows] of rowGroups) {
        const name = rows[0]!.collection;
        const error = await this.savepoint(tx, async () => {
          const cols = await collectionsRepo.columns(tx, id);
          if (!(await collectionsRepo.byId(tx, id))) throw new Error(`collection '${name}' is not on this edge`);
          // the platform's copy of a write is the reference (equal stamps: its values)
          await applyRows(tx, id, cols, rows, { ties: true });
          if (m.snapshot && this.fullSince) await snapshotSeenRepo.add(tx, id, rows.map((r) => r.item_id));
        });
        collections.add(id);
        results.push({ type: "row", name, seq: rowSeq.get(id)!, ...(rowVersion.has(id) ? { version: rowVersion.get(id)! } : {}), ...(error ? { error } : {}) });
      }
      await this.noteFailures(tx, results);
      if (!m.snapshot) await syncStateRepo.set(tx, "cursor", String(m.upTo));
      await this.d.changes.saveClock(tx);
    });
    this.d.log.debug("batch applied", { upTo: m.upTo, snapshot: m.snapshot, changes: m.changes.length, seqs: m.changes.length <= 20 ? m.changes.map((c) => c.seq) : undefined });
    if (types.has("collection")) await this.refreshUpCollections();
    this.d.invalidate(this.systemKey, types, collections);
    if (adapters.size) await this.redeploy(adapters);
    this.appliedBatches++;
    for (const r of results) if (r.error) this.d.log.warn("asset failed to apply", { ...r });
    this.send(ws, { t: "ack", upTo: m.upTo, snapshot: m.snapshot, results });
  }

  /** The services and libraries of a batch that do not compile, with why. */
  private async notCompiling(changes: WireChange[]): Promise<Map<WireChange, string>> {
    const out = new Map<WireChange, string>();
    if (!this.d.compileCheck) return out;
    for (const ch of changes) {
      if (ch.op !== "upsert" || (ch.type !== "service" && ch.type !== "library")) continue;
      const code = (ch.body as { code?: unknown } | null)?.code;
      const p = typeof code === "string" ? await this.d.compileCheck(code, `${ch.type} ${ch.name}.js`) : null;
      if (p) out.set(ch, `${ch.type} '${ch.name}' does not compile: ${problemText(p)}`);
    }
    return out;
  }

  private async savepoint(tx: Executor, fn: () => Promise<void>): Promise<string | undefined> {
    await tx.run("SAVEPOINT asset");
    try {
      await fn();
      await tx.run("RELEASE asset");
      return undefined;
    } catch (err) {
      await tx.run("ROLLBACK TO asset");
      await tx.run("RELEASE asset");
      return err instanceof Error ? err.message : String(err);
    }
  }

  /** The snapshot is complete: drop what the template's kinds hold that it did not include, and
   *  take the snapshot's position in the log. */
  private async endSnapshot(ws: WebSocket, m: Extract<PlatformMessage, { t: "snapshot_end" }>) {
    const sk = this.systemKey;
    const types = new Set<string>(Object.keys(m.keep));
    const collections = new Set<string>();
    let dropped = 0;
    await this.d.db.tx(async (tx) => {
      for (const [type, names] of Object.entries(m.keep)) {
        const keep = new Set(names);
        // only what came from the platform goes: assets made on the edge itself stay
        const local = new Set(await localNames(tx, sk, type));
        for (const name of await syncedAssetsRepo.ofType(tx, type)) {
          if (keep.has(name)) continue;
          if (local.has(name)) await this.savepoint(tx, () => removeLocal(tx, sk, type, name));
          await syncedAssetsRepo.remove(tx, type, name);
        }
      }
      if (m.rows && this.fullSince) {
        for (const id of m.rows) {
          if (!(await collectionsRepo.byId(tx, id))) continue;
          const gone = await snapshotSeenRepo.unseen(tx, id, this.fullSince);
          for (const item of gone) await collectionsRepo.deleteRow(tx, id, item);
          if (gone.length) { dropped += gone.length; collections.add(id); }
        }
        await snapshotSeenRepo.clear(tx);
      }
      await syncStateRepo.set(tx, "cursor", String(m.seq));
      await syncStateRepo.set(tx, "snapshot", "done");
      await this.d.changes.saveClock(tx);
    });
    if (m.rows) this.fullSince = null;
    if (dropped) this.d.log.info("rows the full snapshot did not bring were removed", { rows: dropped });
    await this.refreshUpCollections();
    this.d.invalidate(sk, types, collections);
    this.send(ws, { t: "ack", upTo: m.seq, snapshot: true, results: [] });
  }

  /** Sends the next outbox batch (at most OUTBOX_BATCH items, about BATCH_BYTES) when connected and
   *  nothing is waiting for an acknowledgement. A row write this edge already holds a later write
   *  or delete of (its own, or the platform's) is not sent: it lost, and would only come back. */
  async sendOutbox() {
    const ws = this.ws;
    if (!ws || !this.connected || this.upInflight) return;
    this.upInflight = true;
    try {
      const items: { id: number; kind: string; body: string }[] = [];
      let bytes = 0, after = 0;
      read: for (;;) {
        const next = await outboxRepo.after(this.d.db, after, OUTBOX_READ);
        for (const i of next) {
          after = i.id;
          items.push(i);
          bytes += i.body.length + 50;
          if (items.length >= OUTBOX_BATCH || bytes >= BATCH_BYTES) break read;
        }
        if (next.length < OUTBOX_READ) break;
      }
      const stale = await this.superseded(items);
      if (stale.size) await outboxRepo.remove(this.d.db, [...stale]);
      const send = items.filter((i) => !stale.has(i.id));
      if (!send.length || this.ws !== ws) { this.upInflight = false; if (stale.size && this.ws === ws) void this.sendOutbox(); return; }
      this.inflightBytes = send.reduce((n, i) => n + i.body.length, 0);
      this.inflightRows = send.filter((i) => i.kind === "row").map((i) => { const c = JSON.parse(i.body) as RowChange; return { collection_id: c.collection_id, item_id: c.item_id }; });
      const left = Math.max(0, (await this.outboxSize()) - send.length);
      if (this.ws !== ws) { this.upInflight = false; return; }
      this.send(ws, { t: "up", items: send.map((i) => ({ id: i.id, kind: i.kind, body: i.body })), left });
    } catch (err) {
      this.upInflight = false;
      throw err;
    }
  }

  /** Outbox row writes older than what the edge holds of their row. */
  private async superseded(items: { id: number; kind: string; body: string }[]): Promise<Set<number>> {
    const byCollection = new Map<string, { id: number; item: string; hlc: string }[]>();
    for (const i of items) {
      if (i.kind !== "row") continue;
      const c = JSON.parse(i.body) as RowChange;
      (byCollection.get(c.collection_id) ?? byCollection.set(c.collection_id, []).get(c.collection_id)!).push({ id: i.id, item: c.item_id, hlc: c.hlc });
    }
    const out = new Set<number>();
    for (const [collection, list] of byCollection) {
      if (!(await collectionsRepo.byId(this.d.db, collection))) continue;
      const ids = list.map((x) => x.item);
      const stamps = await collectionsRepo.stamps(this.d.db, collection, ids);
      const tombs = await tombstonesRepo.forItems(this.d.db, collection, ids);
      for (const x of list) {
        const row = stamps.get(x.item) ?? "", tomb = tombs.get(x.item) ?? "";
        if (row > x.hlc || tomb > x.hlc) out.add(x.id);
      }
    }
    return out;
  }

  outboxSize() { return outboxRepo.count(this.d.db); }

  /** Holds the outbox to --outbox-max-mb and --outbox-max-age: past either, the oldest items are
   *  dropped (they would otherwise fill the gateway's disk while the platform is out of reach),
   *  with a log line, and counted. The size is measured only when the running tally passes the
   *  bound. */
  async trimOutbox() {
    if (this.trimming) return;
    this.trimming = true;
    try {
      const db = this.d.db, { outboxMaxMb, outboxMaxAge } = this.d.config;
      this.outboxBytes += this.d.changes.takeOutboxAdded();
      const reasons: string[] = [];
      let dropped = 0;
      const dropThrough = async (id: number) => db.tx(async (tx) => { const n = await outboxRepo.countThrough(tx, id); await outboxRepo.ackUpTo(tx, id); return n; });
      const max = outboxMaxMb * 1024 * 1024;
      if (this.outboxBytes > max) {
        let excess = (await outboxRepo.bytes(db)) - max, through = 0;
        if (excess > 0) {
          reasons.push(`more than --outbox-max-mb (${outboxMaxMb} MB)`);
          for (let more = true; more && excess > 0;) {
            const sizes = await outboxRepo.sizesAfter(db, through, 1_000);
            more = sizes.length === 1_000;
            for (const x of sizes) { through = x.id; excess -= x.n; if (excess <= 0) break; }
          }
          dropped += await dropThrough(through);
        }
        this.outboxBytes = await outboxRepo.bytes(db);
      }
      if (outboxMaxAge > 0) {
        const cutoff = Date.now() - outboxMaxAge * 1000;
        const oldest = await outboxRepo.oldest(db);
        if (oldest !== null && oldest < cutoff) {
          reasons.push(`older than --outbox-max-age (${outboxMaxAge} s)`);
          dropped += await dropThrough(await outboxRepo.lastBefore(db, cutoff));
          this.outboxBytes = await outboxRepo.bytes(db);
        }
      }
      if (dropped) {
        this.outboxDropped += dropped;
        this.d.log.warn("outbox over its bounds: the oldest items were dropped", { dropped, why: reasons.join(", "), bytes: this.outboxBytes });
      }
    } finally {
      this.trimming = false;
    }
  }

  /** Assets whose last application failed, by type (for /metrics). */
  async failedAssets(): Promise<Record<string, number>> {
    const by: Record<string, number> = {};
    for (const f of Object.values(await this.failures(this.d.db))) by[f.type] = (by[f.type] ?? 0) + 1;
    return by;
  }

  /** The link and the assets as this edge sees them (its local status endpoint): what it holds
   *  from the platform, and what failed to apply with the error. */
  async localStatus() {
    const db = this.d.db;
    const failures = Object.values(await this.failures(db));
    const failed = new Map(failures.map((f) => [`${f.type}\u0000${f.name}`, f]));
    const assets: { asset_type: string; asset_name: string; status: "synced" | "failed"; last_error: string; source: string; entry: string }[] = [];
    // the template entry that brings each, and where it comes from (the edge's own, its named template)
    const from = (type: string, name: string) => {
      const e = isDefinitionType(type) || type === "row" ? entryFor(this.template, type as AssetType, name) : undefined;
      return { source: e?.source ?? "", entry: e ? `${e.def_module}/${e.def_name}` : "" };
    };
    for (const type of SYNCED_TYPES)
      for (const name of (await syncedAssetsRepo.ofType(db, type)).sort())
        if (!failed.has(`${type}\u0000${name}`)) assets.push({ asset_type: type, asset_name: name, status: "synced", last_error: "", ...from(type, name) });
    for (const f of failures) assets.push({ asset_type: f.type, asset_name: f.name, status: "failed", last_error: f.error, ...from(f.type, f.name) });
    return {
      connected: this.connected, lastConnectedAt: this.lastConnectedAt, lastContactAt: this.lastContactAt,
      cursor: Number((await syncStateRepo.get(db, "cursor")) ?? "0"), snapshotDone: (await syncStateRepo.get(db, "snapshot")) === "done",
      outbox: await this.outboxSize(), outboxDropped: this.outboxDropped, ...(this.refusal ? { refused: this.refusal } : {}), assets,
      linkFailure: this.linkFailure, template: (await syncStateRepo.get(db, "template_name")) ?? "",
    };
  }
}

/** How applying an asset's change went (the platform records it): the change's position and
 *  the asset's version it brought, and the error when it failed. */
interface AssetResult { type: string; name: string; seq: number; version?: number; error?: string }

/** What failed when the edge tried to reach its platform: the name did not resolve (dns), no
 *  TCP connection (tcp: refused, reset, unreachable), none in time (timeout), the TLS handshake
 *  (tls: the certificate, the CA), an HTTP answer that is not the sync channel (http), a refusal
 *  by the platform (refused: name or token, protocol, version), the link closed before the
 *  welcome (closed). */
export type LinkCause = "dns" | "tcp" | "timeout" | "tls" | "http" | "refused" | "closed";

const hostOf = (url: string) => { try { return new URL(url).host; } catch { return url; } };

/** A socket's error (Bun's: "WebSocket connection to '<url>' failed: <why>", with a code) as a cause. */
export function linkCause(err: unknown, platformUrl: string): { cause: LinkCause; message: string } {
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === "string" ? e.code : "";
  const text = String(e?.message ?? err ?? "").replace(/^WebSocket connection to '[^']*' failed: /, "");
  const host = hostOf(platformUrl);
  if (/^(ENOTFOUND|EAI_AGAIN|EAI_NONAME|EAI_FAIL|EAI_NODATA)$/.test(code) || /getaddrinfo|DNS/i.test(text))
    return { cause: "dns", message: `the platform's host name in ${host} does not resolve (${code || text})` };
  if (code === "ETIMEDOUT") return { cause: "timeout", message: `no connection to ${host} in time (${code})` };
  if (/^(ECONNREFUSED|ECONNRESET|EHOSTUNREACH|ENETUNREACH|EADDRNOTAVAIL|EPIPE)$/.test(code))
    return { cause: "tcp", message: `${code === "ECONNREFUSED" ? `connection refused by ${host}: nothing listens there` : `${text} (${code})`}` };
  if (/TLS|SSL|certificate|CERT|self.signed/i.test(`${code} ${text}`) || code === "EPROTO")
    return { cause: "tls", message: `TLS with ${host} failed: ${text}${code ? ` (${code})` : ""}` };
  const http = /Expected 101 status code: (\d+)/.exec(text);
  if (http) return { cause: "http", message: `${host} answered HTTP ${http[1]} instead of opening the sync channel (is --platform-url the platform's address?)` };
  return { cause: "tcp", message: text || "the connection failed" };
}

/** The kinds of definitions the platform sends an edge. */
const SYNCED_TYPES = ["service", "library", "trigger", "timer", "collection", "role", "user", "device", "adapter", "portal", "plugin"];

function readPem(path: string): string {
  try { return readFileSync(path, "utf8"); } catch (e) { throw new Error(`--platform-ca ${path}: ${(e as Error).message}`); }
}

/** The names of a kind an edge holds (to purge what a snapshot no longer includes). */
async function localNames(ex: Executor, sk: string, type: string): Promise<string[]> {
  if (!isDefinitionType(type)) return [];
  const kind = KINDS[type];
  return (await kind.list(ex, sk)).map((r) => kind.nameOf(r));
}

/** Removes a local asset by name (a snapshot no longer includes it). */
async function removeLocal(ex: Executor, sk: string, type: string, name: string): Promise<void> {
  if (!isDefinitionType(type)) return;
  const body = await KINDS[type].deleteBody(ex, sk, name);
  if (body !== undefined) await KINDS[type].remove(ex, sk, name, body);
}

/** Rows by collection. */
function groupBy(rows: { collection_id: string; item_id: string }[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const r of rows) (out.get(r.collection_id) ?? out.set(r.collection_id, []).get(r.collection_id)!).push(r.item_id);
  return out;
}
