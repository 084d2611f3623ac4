// Edges: records on the user and developer
// paths, templates, sync status and retry, and the sync channel itself (a WebSocket).
import { timingSafeEqual } from "node:crypto";
import { Elysia } from "elysia";
import { developerOnly, type Principal } from "../../auth/principal.ts";
import { fail } from "../../core/errors.ts";
import { hashToken } from "../../core/ids.ts";

import { SYNC_PATH } from "../../sync/protocol.ts";
import { LINK_EVENTS_KEPT } from "../../sync/platform/hub.ts";
import { conditionalJson, flagParam, jsonAnswer, jsonBody, principalOf, queryOf, tokenOf, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

type P = Record<string, string>;
/** link events answered when no limit is given */
const LINK_LOG_DEFAULT = 50;
const sk = (p: unknown) => (p as P).systemKey!;
const nm = (p: unknown) => (p as P).name!;

/** An edge as a fleet view shows it: what a row needs, and nothing that changes while nothing
 *  happens (a connected edge's last_talked moves with every ping: null here, it is talking now),
 *  so that a polled page answers 304 until an edge connects, drops, or an asset's status moves. */
async function fleetRow(e: Record<string, unknown>, assets: Promise<{ status: string }[]>) {
  const sync_counts: Record<string, number> = { pending: 0, synced: 0, failed: 0 };
  for (const a of await assets) sync_counts[a.status] = (sync_counts[a.status] ?? 0) + 1;
  return { name: e.name, description: e.description, template: e.template, isConnected: e.isConnected, first_talked: e.first_talked,
    last_talked: e.isConnected ? null : e.last_talked, sync_lag: e.sync_lag, sync_counts };
}

export const edgeRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  const hub = () => {
    if (!s.sync) throw fail("INVALID_ARGUMENT", "sync status is kept by the platform, not by an edge");
    return s.sync;
  };
  // same rights as the edge's sync status; an unknown edge is NOT_FOUND
  const linkLog = async (p: Principal, request: Request, systemKey: string, name: string) => {
    await s.systems.accessAsDeveloper(p, systemKey);
    const raw = queryOf(request).get("limit");
    const limit = raw === null || raw === "" ? LINK_LOG_DEFAULT : Number(raw);
    if (!Number.isInteger(limit) || limit < 1 || limit > LINK_EVENTS_KEPT) throw fail("INVALID_ARGUMENT", `limit must be an integer from 1 to ${LINK_EVENTS_KEPT}`);
    await s.edges.requireEdge(systemKey, name);
    return hub().linkLog(systemKey, name, limit);
  };
  let app = new Elysia()
    .get("/api/v/2/edges/:systemKey", caller(async (p, { request, params }) => jsonAnswer(await s.edges.list(p, params.systemKey, queryOf(request).get("query")))))
    // a fleet view's parameters (failing; view=fleet; count's by=state) answer with an ETag
    // (If-None-Match: 304 when nothing changed)
    .get("/admin/edges/:systemKey", caller(async (p, { request, params }) => {
      const q = queryOf(request);
      const failing = flagParam(q, "failing"), view = q.get("view");
      if (view !== null && view !== "fleet") throw fail("INVALID_ARGUMENT", "view must be fleet");
      const list = await s.edges.list(p, params.systemKey, q.get("query"), { failing });
      if (failing === undefined && view === null) return jsonAnswer(list);
      if (!view) return conditionalJson(request, list);
      await s.systems.accessAsDeveloper(p, params.systemKey);
      return conditionalJson(request, await Promise.all(list.map((e) => fleetRow(e, hub().status(params.systemKey, e.name as string)))));
    }))
    .get("/api/v/3/edges/:systemKey/count", caller(async (p, { request, params }) => {
      const q = queryOf(request), by = q.get("by"), failing = flagParam(q, "failing");
      if (by === null) return failing === undefined ? s.edges.count(p, params.systemKey, q.get("query")) : conditionalJson(request, await s.edges.count(p, params.systemKey, q.get("query"), failing));
      if (by !== "state") throw fail("INVALID_ARGUMENT", "by must be state");
      if (q.get("query") !== null || failing !== undefined) throw fail("INVALID_ARGUMENT", "by=state counts the whole fleet: it takes no query or failing");
      return conditionalJson(request, await s.edges.stateCounts(p, params.systemKey));
    }))
    .get("/api/v/3/edges/:systemKey/columns", caller((p, { params }) => s.edges.columns(p, params.systemKey)))
    .get("/admin/edges/:systemKey/columns", caller((p, { params }) => s.edges.columns(p, params.systemKey)))
    .post("/admin/edges/:systemKey/columns", caller(async (p, { request, params }) => s.edges.addColumn(p, params.systemKey, await jsonBody(request))))
    .delete("/admin/edges/:systemKey/columns", caller((p, { request, params }) => {
      const q = queryOf(request);
      return s.edges.deleteColumn(p, params.systemKey, q.get("column") ?? q.get("column_name"));
    }))
    // templates (also on the older "sync" paths)
    .get("/admin/edges/template/:systemKey", caller((p, { params }) => s.edges.templates(p, params.systemKey)))
    .put("/admin/edges/template/:systemKey/:name", caller(async (p, { request, params }) => s.edges.changeTemplate(p, params.systemKey, params.name, await jsonBody(request))))
    .get("/admin/edges/sync/:systemKey", caller((p, { params }) => s.edges.templates(p, params.systemKey)))
    .put("/admin/edges/sync/:systemKey/:name", caller(async (p, { request, params }) => s.edges.changeTemplate(p, params.systemKey, params.name, await jsonBody(request))))
    // sync status
    .get("/admin/:systemKey/sync/edge/status/:name", caller(async (p, { params }) => {
      await s.systems.accessAsDeveloper(p, params.systemKey);
      return hub().status(params.systemKey, params.name);
    }))
    .get("/admin/:systemKey/sync/alledges/status", caller(async (p, { params }) => {
      await s.systems.accessAsDeveloper(p, params.systemKey);
      const edges = await s.edges.list(p, params.systemKey, null);
      return Promise.all(edges.map(async (e) => ({ edge_name: e.name, isConnected: e.isConnected, sync_lag: e.sync_lag, assets: await hub().status(params.systemKey, e.name as string) })));
    }))
    .post("/admin/:systemKey/sync/retry", caller(async (p, { request, params }) => {
      await s.systems.accessAsDeveloper(p, params.systemKey);
      const { edges, only } = await s.edges.retryTargets(p, params.systemKey, await jsonBody(request));
      const out = [];
      for (const e of edges) { await s.edges.requireEdge(params.systemKey, e); out.push(await hub().retry(params.systemKey, e, only)); }
      return out;
    })) as unknown as Elysia;
  for (const base of ["/api/v/3/edges/:systemKey/:name", "/admin/edges/:systemKey/:name"]) {
    app = app
      // the link's latest events, newest first (?limit=1..100, default 50)
      .get(`${base}/link`, caller((p, { request, params }) => linkLog(p, request, sk(params), nm(params))))
      .get(base, caller((p, { params }) => s.edges.get(p, sk(params), nm(params))))
      .post(base, caller(async (p, { request, params }) => s.edges.create(p, sk(params), nm(params), await jsonBody(request))))
      .put(base, caller(async (p, { request, params }) => s.edges.update(p, sk(params), nm(params), await jsonBody(request))))
      .delete(base, caller((p, { params }) => s.edges.remove(p, sk(params), nm(params)))) as unknown as Elysia;
  }
  if (s.sync) {
    const hub = s.sync;
    type RawSocket = { sendText(t: string): unknown; sendBinary(b: Uint8Array): unknown; close(c?: number, r?: string): unknown; terminate?(): void; remoteAddress?: string; getBufferedAmount?(): number };
    const sockets = new WeakMap<RawSocket, { send(t: string): void; sendBinary(b: Uint8Array): void; close(c?: number, r?: string): void; terminate(): void; remote?: string; buffered(): number }>();
    // Bun's own socket: its text send, not the wrapper's (which checks every message against a
    // schema this route does not have)
    const socket = (raw: RawSocket) => {
      let x = sockets.get(raw);
      // terminate: a silent link is dropped at once (a close handshake would wait on it)
      if (!x) {
        x = { send: (t) => { raw.sendText(t); }, close: (c, r) => { raw.close(c, r); }, terminate: () => { raw.terminate?.(); },
          sendBinary: (b) => { raw.sendBinary(b); }, remote: raw.remoteAddress, buffered: () => raw.getBufferedAmount?.() ?? 0 };
        sockets.set(raw, x);
      }
      return x;
    };
    // The link is upgraded here, its events going to the hub as Bun hands them over (Elysia's
    // listener calls the handlers on the socket's data). Elysia's WebSocket route made for each
    // link a copy of the request's context, a message parser and its error handlers, and at its
    // open and close (and each message) a wrapper binding a dozen methods: a large part of a
    // herd's upgrades after a restart.
    const link = {
      open(raw: RawSocket) { hub.open(socket(raw)); },
      message(raw: RawSocket, msg: unknown) { void hub.message(socket(raw), msg); },
      close(raw: RawSocket, code?: number, reason?: string) { void hub.close(socket(raw), code, reason); },
    };
    app = app.get(SYNC_PATH, ({ request, server }) => {
      if (server?.upgrade(request, { data: link })) return undefined;
      throw fail("INVALID_ARGUMENT", "this route is the edge sync link: it takes a WebSocket upgrade");
    }) as unknown as Elysia;
  }
  if (s.edgeSync) {
    const edge = s.edgeSync, c = s.config;
    const own = Buffer.from(hashToken(c.edgeToken!));
    const seconds = (ms: number) => (ms ? Math.floor(ms / 1000) : null);
    // an edge's own view of its link and assets, for its developer or for whoever holds the edge's
    // token (a script on the gateway, `outpost status`), in any token header
    app = app.get("/api/v/4/edge/status", async ({ request }) => {
      const token = tokenOf(request);
      const mine = token !== null && timingSafeEqual(Buffer.from(hashToken(token)), own);
      if (!mine) await s.systems.accessAsDeveloper(developerOnly(await principalOf(s.tokens, request), "edge status"), c.systemKey!);
      const st = await edge.localStatus();
      return {
        edge: c.edgeName, system_key: c.systemKey, platform_url: c.platformUrl, connected: st.connected,
        last_connected: seconds(st.lastConnectedAt), last_contact: seconds(st.lastContactAt), cursor: st.cursor, snapshot_done: st.snapshotDone,
        // why the link is refused (by the platform: name or token, protocol, version; or by this
        // edge: the platform's protocol), "" when it is not
        refused: st.refused ?? "",
        // while reaching the platform fails: the latest cause (dns, tcp, timeout, tls, http,
        // refused, closed), since when, the last try and how many (null: the last try was welcomed)
        link_error: st.linkFailure ? { cause: st.linkFailure.cause, message: st.linkFailure.message, since: seconds(st.linkFailure.since), last_attempt: seconds(st.linkFailure.last), attempts: st.linkFailure.attempts } : null,
        // the edge's named template ("" : none); each asset says which entry brings it and from where
        template: st.template,
        outbox: st.outbox, synced: st.assets.filter((a) => a.status === "synced").length, failed: st.assets.filter((a) => a.status === "failed").length, assets: st.assets,
        // files to and from the platform (bucket sets' outbox and inbox), newest first
        files: st.files,
      };
    }) as unknown as Elysia;
  }
  return app;
};
