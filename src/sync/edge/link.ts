// The edge's side of sync: connects to its platform (reconnecting with backoff and jitter),
// applies snapshots and changes (each batch together with the cursor in one transaction, each
// asset in its own savepoint so one that fails is reported and the rest still apply), and sends
// the outbox (rows of collections that flow up, relayed messages) until the platform acknowledges it.
// The link is here; its steps are apply.ts, outbox.ts, status.ts (what failed, the local status),
// linkFailure.ts (why the platform cannot be reached) and upstream.ts (developers' sign-ins).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { UpstreamVerdict } from "../../domain/developers.ts";
import { snapshotSeenRepo, syncStateRepo } from "../../store/sync.ts";
import { BUILD } from "../../version.ts";
import { AdapterRunner } from "../../adapters/runner.ts";
import { CLAIMED_PROTOCOL, type PlatformMessage, PROTOCOL_REFUSED_CLOSE, protocolRefusal, SYNC_PATH } from "../protocol.ts";
import { proxyFor } from "../proxy.ts";
import { FLEET_FEATURE } from "../fleet.ts";
import { publishable } from "../relay.ts";
import { EdgeApply } from "./apply.ts";
import { EdgeFiles } from "./files.ts";
import { EdgeTemplate } from "./template.ts";
import type { EdgeSyncDeps } from "./deps.ts";
import { hostOf, linkCause, LinkFailures } from "./linkFailure.ts";
import { Outbox } from "./outbox.ts";
import { failedAssets, failures, localStatus } from "./status.ts";
import { verifyDeveloper } from "./upstream.ts";

export type { EdgeSyncDeps } from "./deps.ts";
export { type LinkCause, linkCause } from "./linkFailure.ts";

/** Reconnect delays: doubling from the least to the most, each a random part of it (so a fleet
 *  does not come back all at once), back to the least after a welcome. The most is small so a
 *  healed link is used again within seconds. */
const BACKOFF_MIN_MS = 250;
const BACKOFF_MAX_MS = 2_000;
/** Longest wait for the socket to open (a dead route never refuses: it says nothing). */
const OPEN_TIMEOUT_MS = 3_000;
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
  private applying: Promise<void> = Promise.resolve();
  connected = false;
  /** ms timestamps, for tests and the status page */
  lastConnectedAt = 0;
  private readonly systemKey: string;
  readonly adapters: AdapterRunner;
  /** when the platform was last heard from (ms; 0: never since start) */
  lastContactAt = 0;
  /** the CA bundle an https:// platform's certificate is checked against (--platform-ca) */
  private readonly tls: { ca: string } | undefined;
  /** the proxy the platform is reached through (HTTPS_PROXY / HTTP_PROXY, unless NO_PROXY) */
  private readonly proxy: string | undefined;
  /** why reaching the platform fails, while it does */
  private readonly failures: LinkFailures;
  private readonly outbox: Outbox;
  private readonly apply: EdgeApply;
  private readonly tpl: EdgeTemplate;
  private readonly files: EdgeFiles;

  constructor(private readonly d: EdgeSyncDeps) {
    this.systemKey = d.config.systemKey!;
    this.pingMs = d.config.syncPingMs;
    this.tls = d.config.platformCa ? { ca: readPem(d.config.platformCa) } : undefined;
    this.proxy = proxyFor(d.config.platformUrl!, process.env);
    this.adapters = new AdapterRunner(d.config.adaptersDir ?? join(d.config.dataDir, "adapters"), { user: d.config.adaptersUser, dataDir: d.config.dataDir });
    this.failures = new LinkFailures(d.log, d.config);
    this.outbox = new Outbox(d, { ws: () => this.ws, connected: () => this.connected, send: (ws, m) => this.send(ws, m) });
    this.tpl = new EdgeTemplate(d, this.systemKey);
    this.files = new EdgeFiles(d.files, d.log, this.systemKey, d.config.edgeName!);
    this.apply = new EdgeApply(d, this.systemKey, this.adapters, () => this.tpl.refreshUpCollections());
  }

  async start() {
    await this.tpl.restore();
    this.d.changes.onCommitted((sk) => { if (sk === this.systemKey) void this.outbox.send(); });
    await this.outbox.start();
    await snapshotSeenRepo.ensure(this.d.db);
    this.connect();
  }

  stop() {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.watchdog) clearInterval(this.watchdog);
    this.outbox.stop();
    this.ws?.close(1000, "edge stopping");
  }

  /** Asks the platform whether a developer's password is right (see Developers.authenticate). */
  verifyDeveloper(email: string, password: string): Promise<UpstreamVerdict> { return verifyDeveloper(this.d.config.platformUrl!, this.tls, this.proxy, email, password); }

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
    catch (err) { this.failures.attemptFailed(linkCause(err, this.d.config.platformUrl!)); this.retry(); return; }
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
      const failed = Object.values(await failures(this.d.db));
      const synced = (await syncStateRepo.get(this.d.db, "snapshot")) === "done";
      const incarnation = (await syncStateRepo.get(this.d.db, "incarnation")) ?? "";
      this.send(ws, { t: "hello", systemKey: this.systemKey, edge: this.d.config.edgeName, token: this.d.config.edgeToken, cursor, version: BUILD, os: process.platform, arch: process.arch, failures: failed, synced,
        incarnation, fresh: !this.welcomed, pingMs: this.pingMs, hlc: this.d.changes.clock.now(), time: Date.now(), protocol: CLAIMED_PROTOCOL, outbox: await this.outbox.size(),
        features: this.d.fleet ? [FLEET_FEATURE] : [] });
    };
    ws.onmessage = (ev) => {
      this.lastContactAt = Date.now();
      this.lastHeard = Date.now();
      if (this.files.frame(ws, ev.data)) return;
      let m: PlatformMessage;
      try { m = JSON.parse(typeof ev.data === "string" ? ev.data : Buffer.from(ev.data as ArrayBuffer).toString("utf8")) as PlatformMessage; }
      catch { return; }
      // adapter commands run beside sync, so a long one does not hold up changes
      if (m.t === "control") { void this.control(ws, m); return; }
      // so do relayed requests and remote operations
      if (this.d.fleet?.handle(m, (x) => this.send(ws, x))) return;
      // relayed messages are live traffic: not held up behind a batch being applied
      if (m.t === "relay") { this.relayed(m); return; }
      if (this.files.message(ws, m)) return;
      // messages are handled one after another, in order
      this.applying = this.applying.then(() => this.handle(ws, m)).catch((err) => {
        this.d.log.error("sync message failed", { err });
        ws.close(1011, "sync error");
      });
    };
    ws.onclose = (ev) => this.lost(ws, `closed (${ev.code}${ev.reason ? ` ${ev.reason}` : ""})`);
    // onclose follows; the error says why the socket did not open (DNS, TCP, TLS, HTTP)
    ws.onerror = (ev) => { if (!opened && !this.failures.failureOf.has(ws)) this.failures.failureOf.set(ws, linkCause((ev as ErrorEvent).error ?? ev, this.d.config.platformUrl!)); };
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
        else if (!this.failures.failureOf.has(ws)) this.failures.failureOf.set(ws, opened()
          ? { cause: "timeout", message: `the platform did not answer the sync hello within ${Math.round((now - started) / 1000)} s` }
          : { cause: "timeout", message: `${hostOf(this.d.config.platformUrl!)} did not answer within ${OPEN_TIMEOUT_MS / 1000} s (a firewall or a dead route may drop the connection)` });
        ws.terminate();
        this.lost(ws, "silent");
        return;
      }
      if (this.connected && now - this.lastPing >= this.pingMs) {
        this.lastPing = now;
        // with the outbox's size, which the platform shows on its /metrics
        void this.outbox.size().then((outbox) => this.send(ws, { t: "ping", outbox }), () => this.send(ws, { t: "ping" }));
      }
    }, Math.max(50, Math.min(1_000, Math.floor(this.pingMs / 4))));
    this.watchdog.unref?.();
  }

  /** The socket is gone (closed, or given up as silent): reconnect. */
  private lost(ws: WebSocket, why: string) {
    if (this.ws !== ws) return;
    this.ws = null;
    if (this.watchdog) { clearInterval(this.watchdog); this.watchdog = null; }
    this.outbox.linkLost();
    this.files.lost();
    if (this.connected) {
      this.connected = false;
      this.d.events.emit("StartConnectDisconnect::PlatformDisconnectedOnEdge", this.systemKey, {});
      this.d.log.warn("platform disconnected", { why });
    } else this.failures.attemptFailed(this.failures.failureOf.get(ws) ?? { cause: "closed", message: `the link ${why} before the platform welcomed the edge` });
    this.retry();
  }

  /** Reconnects after a growing, jittered delay (so a fleet does not come back all at once). */
  private retry() {
    if (this.stopped) return;
    // a platform that refused this edge's protocol or version will not take it a second later
    const delay = this.failures.incompatible ? REFUSED_RETRY_MS : this.backoff * (0.5 + Math.random() / 2);
    this.backoff = Math.min(BACKOFF_MAX_MS, this.backoff * 2);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  private send(ws: WebSocket, m: unknown) { if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(m)); }

  private async handle(ws: WebSocket, m: PlatformMessage) {
    switch (m.t) {
      case "welcome": {
        return this.welcome(ws, m);
      }
      case "batch": return this.send(ws, await this.apply.batch(m));
      case "snapshot_end": return this.send(ws, await this.apply.snapshotEnd(m));
      case "template": return this.tpl.changed(m);
      case "up_ack": return this.outbox.acked(m.upTo, this.apply.fullSince);
      case "error": {
        // a platform that does not say what kind of refusal it is: its message does
        const reason = m.reason ?? (/sync protocol/.test(m.message) ? "protocol" : /token|unknown edge/.test(m.message) ? "credentials" : "message");
        this.failures.refused(ws, reason, m.message);
        return;
      }
      case "pong": return;
    }
  }


  /** The platform welcomed this edge: its system, owner and template are stored, and the link is up. */
  private async welcome(ws: WebSocket, m: Extract<PlatformMessage, { t: "welcome" }>) {
    if (this.ws !== ws) return;
    const refusal = protocolRefusal(m.protocol ?? 1, "platform");
    if (refusal) {
      this.failures.refused(ws, "protocol", refusal, true, m.version);
      // the reason goes with the close, so the platform can log and show it
      ws.close(PROTOCOL_REFUSED_CLOSE, refusal.slice(0, 120));
      return;
    }
    this.failures.welcomed();
    await this.tpl.welcomed(m);
    this.d.invalidate(this.systemKey, new Set(["system"]), new Set());
    // a full snapshot (again, if one was interrupted) notes the rows it brings from the start
    this.apply.fullSnapshotFrom(m.snapshot && m.hlc ? m.hlc : null);
    if (this.apply.fullSince) await snapshotSeenRepo.clear(this.d.db);
    this.connected = true;
    this.welcomed = true;
    this.lastConnectedAt = Date.now();
    this.backoff = BACKOFF_MIN_MS;
    this.d.events.emit("StartConnectDisconnect::PlatformConnectedOnEdge", this.systemKey, {});
    this.d.log.info("connected to the platform", { snapshot: m.snapshot, seq: m.seq, platform: m.version ?? "" });
    void this.outbox.send();
    this.files.up(ws, (x) => this.send(ws, x));
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

  /** rows and messages waiting to go up */
  outboxSize() { return this.outbox.size(); }
  /** outbox items dropped past its bounds since the process started (/metrics) */
  get outboxDropped() { return this.outbox.dropped; }
  /** batches applied since the process started */
  get appliedBatches() { return this.apply.appliedBatches; }
  /** the failure of the tries to reach the platform, while it fails */
  get linkFailure() { return this.failures.linkFailure; }
  /** why the platform (or this edge) refused the link ("": it did not) */
  get refusal() { return this.failures.refusal; }

  /** Sends the next outbox batch, if connected and none is waiting for its acknowledgement. */
  sendOutbox() { return this.outbox.send(); }
  /** Holds the outbox to --outbox-max-mb and --outbox-max-age. */
  trimOutbox() { return this.outbox.trim(); }

  /** Assets whose last application failed, by type (for /metrics). */
  failedAssets(): Promise<Record<string, number>> { return failedAssets(this.d.db); }

  /** The link and the assets as this edge sees them (its local status endpoint). */
  async localStatus() { return { ...(await localStatus(this.d.db, this.tpl.entries, this, this.outbox)), files: await this.files.status() }; }
}

function readPem(path: string): string {
  try { return readFileSync(path, "utf8"); } catch (e) { throw new Error(`--platform-ca ${path}: ${(e as Error).message}`); }
}
