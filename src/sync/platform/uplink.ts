// What an edge sends up: rows of the collections its template sends up (last writer wins; a
// write that lost sends the winner back; a stamp too far ahead is stamped again) and messages
// on relayed topics (published here, and passed on to the edges they name).
import type { Principal } from "../../auth/principal.ts";
import { topicMatches } from "../../auth/permissions.ts";
import { parse as parseHlc } from "../../core/hlc.ts";
import type { RowChange } from "../../domain/changes.ts";
import type { Executor } from "../../store/db.ts";
import { type ColumnDef, collectionsRepo } from "../../store/collections.ts";
import { tombstonesRepo } from "../../store/sync.ts";
import { applyRows, relayFilters, upCollections, wireValues } from "../assets.ts";
import type { EdgeMessage } from "../protocol.ts";
import { publishable, relayTarget } from "../relay.ts";
import { relayDown } from "./relayDown.ts";
import type { EdgeSession } from "./session.ts";
import type { HubState } from "./state.ts";

/** Rows and messages an edge sends up: applied (last writer wins) and passed on to other edges.
 *  A write that lost sends the winner back to its writer (through the log, to every edge). A
 *  stamp too far ahead of the platform's clock is refused: the write is stamped again by the
 *  platform, and its writer takes the new stamp. */
export async function up(h: HubState, s: EdgeSession, m: Extract<EdgeMessage, { t: "up" }>) {
  const sk = s.edge.system_key;
  const rowsByCollection = new Map<string, RowChange[]>();
  const messages: { topic: string; payload: string; qos: number }[] = [];
  const relays = relayFilters(s.template);
  for (const it of m.items) {
    // an edge sends only what its template sends up; anything else is dropped (and acknowledged,
    // so a confused edge does not send it forever)
    let body: Record<string, unknown>;
    try { body = JSON.parse(it.body); } catch { continue; }
    if (!body || typeof body !== "object") continue;
    if (it.kind === "row") {
      if (!isRowChange(body)) continue;
      const { replaces: _none, ...change } = body; // only the platform stamps a write again
      const list = rowsByCollection.get(change.collection_id) ?? [];
      list.push(change);
      rowsByCollection.set(change.collection_id, list);
    } else if (typeof body.topic === "string" && typeof body.payload === "string" && publishable(body.topic)
      && (relayTarget(body.topic) !== null || relays.some((f) => topicMatches(f, body.topic as string)))) {
      messages.push(body as { topic: string; payload: string; qos: number });
    }
  }
  const touched: string[] = [];
  let refused = 0, ahead = 0;
  await h.d.db.tx(async (tx) => {
    const clock = h.d.changes.clock;
    for (const [id, changes] of rowsByCollection) {
      const c = await collectionsRepo.byId(tx, id);
      // only collections this edge may write to the platform
      if (!c || c.system_key !== sk || !upCollections(s.template, [c.name]).length) continue;
      const restamped: RowChange[] = [];
      const stamped = changes.map((ch) => {
        ch.collection = c.name;
        if (clock.observe(ch.hlc)) return ch;
        refused++;
        ahead = Math.max(ahead, clock.aheadBy(ch.hlc));
        const again = { ...ch, hlc: clock.now(), replaces: ch.hlc };
        restamped.push(again);
        return again;
      });
      const columns = await collectionsRepo.columns(tx, id);
      const { applied, lost } = await applyRows(tx, id, columns, stamped);
      const again = new Set(restamped);
      // other edges get what took effect; a write stamped again goes to its writer too
      await h.d.changes.rows(tx, sk, applied.filter((a) => !again.has(a)), s.edge.name);
      await h.d.changes.rows(tx, sk, applied.filter((a) => again.has(a)), "");
      if (lost.length) await h.d.changes.rows(tx, sk, await winners(tx, c.name, id, columns, lost), "");
      touched.push(id);
    }
    await h.d.changes.saveClock(tx);
  });
  if (refused) {
    h.skews.set(s.key, Math.max(h.skews.get(s.key) ?? 0, ahead));
    h.d.log.warn("row stamps refused: the edge's clock is ahead of the platform's by more than --max-clock-skew", { edge: s.key, rows: refused, aheadMs: ahead });
  }
  for (const id of touched) h.d.collections.forgetId(id);
  const broker = h.d.broker();
  const origin: Principal = { kind: "edge", systemKey: sk, id: s.edge.name, name: s.edge.name, tokenHash: "" };
  for (const msg of messages) {
    // the topic as the edge published it: the platform's subscribers of the suffixed topic get
    // it (ClearBlade's relay), those of the bare topic do not
    const target = relayTarget(msg.topic);
    const qos = msg.qos === 1 || msg.qos === 2 ? msg.qos : 0;
    const payload = Buffer.from(msg.payload, "base64");
    // published with the edge as its origin, which the platform's own relay to edges passes
    // over: what goes on to other edges is sent from here, never back to this one
    if (!target || target.to === "platform" || target.to === "broadcast" || target.platform)
      await broker?.publish(sk, msg.topic, payload, qos, false, origin).catch((err) => h.d.log.warn("relayed message not published", { err }));
    if (target && target.to !== "platform") await relayDown(h, sk, msg.topic, payload, qos, s.edge.name);
  }
  if (m.left !== undefined) s.outbox = m.left;
  s.send({ t: "up_ack", upTo: m.items.length ? Math.max(...m.items.map((i) => i.id)) : 0 });
}

/** What the platform holds of rows whose incoming write lost: the row, or its delete. A lost
 *  write that was stamped again keeps naming the stamp its writer holds. */
async function winners(tx: Executor, collection: string, id: string, columns: ColumnDef[], lost: RowChange[]): Promise<RowChange[]> {
  const byItem = new Map(lost.map((l) => [l.item_id, l]));
  const ids = [...byItem.keys()];
  const out: RowChange[] = [];
  const names = ["item_id", ...columns.map((x) => x.name)];
  for (let i = 0; i < ids.length; i += 500) {
    for (const r of await collectionsRepo.byIds(tx, id, names, ids.slice(i, i + 500))) {
      const { _hlc, ...stored } = r;
      const l = byItem.get(r.item_id as string)!;
      byItem.delete(l.item_id);
      out.push({ collection_id: id, collection, item_id: l.item_id, op: "upsert", values: wireValues(columns, stored), hlc: (_hlc as string | null) ?? "", ...(l.replaces ? { replaces: l.replaces } : {}) });
    }
  }
  const tombs = await tombstonesRepo.forItems(tx, id, [...byItem.keys()]);
  for (const [item, l] of byItem) {
    const hlc = tombs.get(item);
    if (hlc) out.push({ collection_id: id, collection, item_id: item, op: "delete", values: null, hlc, ...(l.replaces ? { replaces: l.replaces } : {}) });
  }
  return out;
}

/** The shape of a row change an edge sends up (anything else is dropped). */
function isRowChange(b: Record<string, unknown>): b is Record<string, unknown> & RowChange {
  return typeof b.collection_id === "string" && typeof b.item_id === "string" && (b.op === "upsert" || b.op === "delete") &&
    typeof b.hlc === "string" && parseHlc(b.hlc) !== null && (b.values === null || b.values === undefined || (typeof b.values === "object" && !Array.isArray(b.values)));
}
