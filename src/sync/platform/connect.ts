// An edge's link to the platform: its hello (credentials, protocol, position, what it reports
// failed), refusals (logged and recorded at a bounded rate), its close, links gone silent, and
// its template changing while it is connected.
import { nowIso, nowSeconds } from "../../core/ids.ts";
import type { TemplateEntry } from "../../domain/edges.ts";
import { developerProfile } from "../../store/developers.ts";
import { type EdgeRow, edgesRepo } from "../../store/edges.ts";
import { clusterRepo } from "../../store/cluster.ts";
import { statusRepo } from "../../store/sync.ts";
import { fail } from "../../core/errors.ts";
import { BUILD } from "../../version.ts";
import { CLAIMED_PROTOCOL, type EdgeMessage, PROTOCOL_REFUSED_CLOSE, protocolRefusal, type RefusalReason } from "../protocol.ts";
import { versionOf } from "./writes.ts";
import type { EdgeSession } from "./session.ts";
import type { HubState } from "./state.ts";
import { position } from "./status.ts";
import type { Socket } from "./types.ts";

/** How often at most a refused edge's record is written again for the same reason (its time). */
const REFUSAL_RECORD_MS = 5_000;
/** How often sessions are checked for a silent link. */
export const SWEEP_MS = 250;

export function reject(s: EdgeSession, message: string) {
  if (s.edge && !s.endCause) s.endCause = `protocol error: ${message}`;
  s.send({ t: "error", message, reason: "message" });
  s.ws.close(4000, message.slice(0, 100));
}

/** Refuses an edge's hello: tells the edge `message` and what kind of refusal it is, logs `why`
 *  (said precisely here: the edge is told no more than it needs) as `reason`, at once and then
 *  once per --sync-log-ms per edge with the count in between, and keeps `why` and when on the
 *  edge's record when it has one (written when it changes, else at most every REFUSAL_RECORD_MS).
 *  Every refusal of a hello goes through here (a version refusal too). */
async function refuse(h: HubState, s: EdgeSession, who: string, edge: EdgeRow | undefined, reason: RefusalReason, message: string, why: string, fields: Record<string, unknown> = {}, logMsg = "edge refused") {
  const now = Date.now();
  let r = h.refusals.get(who);
  if (!r || r.why !== why || now - r.loggedAt >= h.d.logMs) {
    h.d.log.warn(logMsg, { edge: who, reason: why, ...(s.ws.remote ? { from: s.ws.remote } : {}), ...(r?.more ? { refusedSinceLastLine: r.more } : {}), ...fields });
    r = { why, loggedAt: now, more: 0, recordedAt: r?.recordedAt ?? 0, recordedWhy: r?.recordedWhy ?? "" };
    h.refusals.set(who, r);
  } else r.more++;
  if (edge && (r.recordedWhy !== why || now - r.recordedAt >= REFUSAL_RECORD_MS)) {
    r.recordedAt = now;
    r.recordedWhy = why;
    await edgesRepo.update(h.d.db, edge.system_key, edge.name, { last_refusal: why, last_refusal_at: nowSeconds() });
    h.writes.linkEvent(edge.system_key, edge.name, "refused", { reason: why, ...(s.ws.remote ? { from: s.ws.remote } : {}) });
  }
  s.send({ t: "error", message, reason });
  s.ws.close(4000, message.slice(0, 100));
}

/** Why a link the platform did not end ended, from its close code. */
function closedBy(code?: number, reason?: string): string {
  if (code === PROTOCOL_REFUSED_CLOSE) return `refused by the edge: ${reason || "sync protocol version"}`;
  if (code === 1000 || code === 1001) return `closed by the edge${reason ? ` (${reason})` : ""}`;
  if (code === undefined || code === 1005 || code === 1006) return "connection lost";
  return `closed by the edge (${code}${reason ? `: ${reason}` : ""})`;
}

/** Records, once per link, that it ended: why, and how long it lasted (whole seconds). */
export function linkEnded(h: HubState, s: EdgeSession, cause: string) {
  if (s.ended || !s.edge || !s.welcomedAt) return;
  s.ended = true;
  h.writes.linkEvent(s.edge.system_key, s.edge.name, "disconnected", { cause, lasted_s: Math.round((Date.now() - s.welcomedAt) / 1000) });
}

export async function close(h: HubState, ws: Socket, code?: number, reason?: string) {
  const s = h.bySocket.get(ws);
  if (!s) return;
  s.closed = true;
  // (a link closed before its hello was admitted: the hello is dropped)
  if (!s.edge) return;
  s.dropped();
  linkEnded(h, s, s.endCause || closedBy(code, reason));
  if (code === PROTOCOL_REFUSED_CLOSE) {
    // the edge refused this platform's protocol: its reason is shown here as at the edge
    const why = `the edge refused this platform: ${reason || "sync protocol version"}`;
    h.refused.set(s.key, { reason: why, at: nowIso() });
    h.d.log.warn("edge refused this platform: its sync protocol is not one the edge speaks", { edge: s.key, reason: reason ?? "", version: s.version });
    // and on the edge's record, as a refusal by the platform is
    await edgesRepo.update(h.d.db, s.edge.system_key, s.edge.name, { last_refusal: why, last_refusal_at: nowSeconds() });
  }
  for (const [id, done] of s.controls) { s.controls.delete(id); done({ err: true, command: "", output: `edge '${s.edge.name}' disconnected before it answered` }); }
  for (const [id, sink] of s.relays) { s.relays.delete(id); sink.fail(fail("EDGE_OFFLINE", `edge '${s.edge.name}' disconnected before it answered`)); }
  for (const [id, done] of s.ops) { s.ops.delete(id); done({ error: { kind: "EDGE_OFFLINE", message: `edge '${s.edge.name}' disconnected before it answered` } }); }
  // out of the sessions before any write: a close whose writes fail (a database out of reach) is
  // not swept and closed again at every sweep (at 10,000 edges on two nodes those retries, 300,000
  // in three minutes, were what kept the pool from every hello)
  const mine = h.sessions.get(s.key) === s;
  if (mine) { h.sessions.delete(s.key); h.bySystem.get(s.edge.system_key)?.delete(s); }
  // what waits to be written of this link goes before its release
  await h.writes.flushOne(s);
  // (a new link of the edge may have come meanwhile)
  if (!mine || h.sessions.has(s.key)) return;
  // only while this node holds it: the edge may have moved to another node meanwhile (a node
  // stopping frees all it holds at once, see SyncHub.stop)
  if (!h.stopping) await clusterRepo.releaseEdge(h.d.db, s.edge.system_key, s.edge.name, h.d.nodeId, nowSeconds());
  h.d.events.emit("StartConnectDisconnect::EdgeDisconnectedOnPlatform", s.edge.system_key, { edgeName: s.edge.name });
  h.d.log.info("edge disconnected", { edge: s.key });
}

/** Ends sessions whose edge has been silent for two ping periods (a link that dropped without
 *  closing: a TCP connection through a dead route never says so). */
export function sweep(h: HubState) {
  const now = Date.now();
  for (const s of h.sessions.values()) {
    if (now - s.lastHeard <= 2 * s.pingMs + SWEEP_MS) continue;
    h.d.log.warn("edge silent, link dropped", { edge: s.key, silentMs: now - s.lastHeard });
    s.endCause ||= `ping timeout (silent for ${Math.round((now - s.lastHeard) / 1000)} s)`;
    if (s.ws.terminate) s.ws.terminate(); else s.ws.close(4003, "silent");
    void close(h, s.ws).catch((err) => h.d.log.warn("closing a silent session failed", { err }));
  }
}

export async function hello(h: HubState, s: EdgeSession, m: Extract<EdgeMessage, { t: "hello" }>) {
  if (s.edge) return reject(s, "hello twice");
  // (records, templates, systems and the log's bounds kept in memory: a herd of hellos reads little)
  const edge = await h.reads.edge(m.systemKey, m.edge);
  const tokenOk = !!edge && h.d.edges.tokenMatches(edge, m.token);
  const who = `${m.systemKey}/${m.edge}`;
  // the edge is not told which of the two it got wrong; the platform's log and record say
  if (!edge) return refuse(h, s, `${m.systemKey}/?`, undefined, "credentials", "unknown edge or wrong token", `no edge '${m.edge}' in system ${m.systemKey}`, { edgeName: m.edge, version: m.version });
  if (!tokenOk) return refuse(h, s, who, edge, "credentials", "unknown edge or wrong token", "wrong token", { version: m.version });
  // an edge speaking a protocol this platform does not: refused, and its status says why
  const refusal = protocolRefusal(m.protocol, "edge");
  if (refusal) {
    h.refused.set(who, { reason: refusal, at: nowIso() });
    await edgesRepo.update(h.d.db, edge.system_key, edge.name, { last_talked: nowSeconds(), last_seen_version: m.version });
    return refuse(h, s, who, edge, "protocol", refusal, refusal, { protocol: m.protocol, version: m.version }, "edge refused: its sync protocol is not one this platform speaks");
  }
  h.refused.delete(who);
  const known = await h.reads.systemAndOwner(m.systemKey);
  if (!known) return refuse(h, s, who, edge, "system", "unknown system", "the edge's system has no owner");
  const sk = edge.system_key;
  s.edge = edge;
  s.pingMs = m.pingMs;
  s.version = m.version;
  s.outbox = m.outbox;
  s.features = m.features;
  s.template = await h.reads.template(edge);
  s.applied = edge.applied_template === null ? null : edge.applied_template === "*" ? s.template : JSON.parse(edge.applied_template) as TemplateEntry[];
  const old = h.sessions.get(s.key);
  if (old && old !== s) { linkEnded(h, old, "replaced by a newer link"); old.closed = true; old.ws.close(4002, "replaced by a new connection"); h.bySystem.get(sk)?.delete(old); }
  h.sessions.set(s.key, s);
  if (!h.bySystem.has(sk)) h.bySystem.set(sk, new Set());
  h.bySystem.get(sk)!.add(s);
  h.d.changes.addSystemWithEdges(sk);
  // the clocks: the edge's stamp counts (within the accepted skew), and how far off it is shows
  if (m.hlc) h.d.changes.clock.observe(m.hlc);
  if (m.time !== undefined) h.skews.set(s.key, Math.round(m.time - Date.now()));
  const { head, valid } = await position(h, sk, m.cursor, m.synced, m.incarnation, edge.incarnation);
  // a new edge, one that held another incarnation of its record, or one whose position the log
  // no longer holds, starts from a full snapshot
  const full = !valid;
  s.cursor = full ? 0 : m.cursor;
  s.sent = full ? head : m.cursor;
  // what the hello says of the edge, and its own word on how far it got (its last acknowledgement
  // may not have arrived), written with the next batch of writes
  // (a record kept in memory is read again once its first contact is written)
  if (edge.first_talked === null) h.reads.forgetRecord(sk, edge.name);
  // (a first contact already recorded is not written again: a herd's edges then say the same)
  h.writes.welcomed(s, { is_connected: 1, ...(edge.first_talked === null ? { first_talked: nowSeconds() } : {}), last_seen_version: m.version, last_seen_os: m.os, last_seen_architecture: m.arch }, h.d.nodeId, !full);
  s.welcomedAt = Date.now();
  h.writes.linkEvent(sk, edge.name, "connected", { node: h.d.nodeId, ...(m.version ? { version: m.version } : {}), ...(m.os ? { os: m.os } : {}), ...(m.arch ? { arch: m.arch } : {}),
    ...(full ? { snapshot: true } : { resumed_from: m.cursor }), ...(s.ws.remote ? { from: s.ws.remote } : {}) });
  // and on what failed (the same), before anything else is sent; outcomes reported before are older
  if (m.failures.length) await h.writes.flush();
  if (m.failures.length) await h.d.db.tx(async (tx) => {
    const at = nowIso();
    const failedNow = new Map((await statusRepo.failedFor(tx, sk, edge.name)).map((r) => [`${r.asset_type}\u0000${r.asset_name}`, r.desired_version]));
    for (const f of m.failures) {
      const type = f.type === "row" ? "collection_rows" : f.type;
      // a failure already recorded (its acknowledgement arrived) counts once
      const version = await versionOf(tx, sk, f);
      if (failedNow.get(`${type}\u0000${f.name}`) !== version) await statusRepo.failed(tx, sk, edge.name, type, f.name, version, (f.error ?? "").slice(0, 2000), at);
    }
  });
  // the owner's profile only: no password hash, no admin right (see Developers.authenticate)
  s.send({ t: "welcome", system: known.system as unknown as Record<string, unknown>, owner: developerProfile(known.owner), template: s.template, snapshot: full, seq: head,
    incarnation: edge.incarnation, hlc: h.d.changes.clock.now(), protocol: CLAIMED_PROTOCOL, version: BUILD, templateName: edge.template });
  if (full) s.jobs.push({ kind: "full", seq: head });
  else {
    // a template changed while the edge was away: what it added comes, what it dropped goes
    s.wantTemplate();
    // deploy-mode assets are copied at every start of the edge
    const deploy = s.template.filter((e) => e.mode === "deploy");
    if (m.fresh && deploy.length) s.jobs.push({ kind: "deploy", scope: { template: deploy, live: false } });
  }
  h.d.events.emit("StartConnectDisconnect::EdgeConnectedOnPlatform", sk, { edgeName: edge.name });
  h.d.log.info("edge connected", { edge: s.key, cursor: m.cursor, snapshot: full, template: !s.holdsTemplate() });
  await s.pump();
}

export async function retemplate(h: HubState, s: EdgeSession) {
  s.edge = (await edgesRepo.get(h.d.db, s.edge.system_key, s.edge.name)) ?? s.edge;
  s.template = await h.d.edges.templateOf(h.d.db, s.edge.system_key, s.edge);
  s.send({ t: "template", template: s.template, templateName: s.edge.template });
  // what the change added comes as a snapshot, what it dropped goes at its end
  s.wantTemplate();
  await s.pump();
}
