// The edge's acknowledgements: a snapshot's pages and end, the log's batches. Its position moves
// (never past what was sent), and the outcome per asset it reports is recorded.
import { nowIso, nowSeconds } from "../../core/ids.ts";
import type { Executor } from "../../store/db.ts";
import { edgesRepo } from "../../store/edges.ts";
import { changesRepo, statusRepo } from "../../store/sync.ts";
import type { EdgeMessage } from "../protocol.ts";
import type { EdgeSession } from "./session.ts";
import type { HubState } from "./state.ts";
import type { AssetResult } from "./types.ts";

export async function ack(h: HubState, s: EdgeSession, m: Extract<EdgeMessage, { t: "ack" }>) {
  const at = nowIso();
  const sk = s.edge.system_key, edge = s.edge.name;
  const was = s.awaiting;
  s.awaiting = null;
  const r = s.running;
  if (was === "page" && r) {
    // a snapshot's outcomes count once it is whole
    for (const x of m.results) r.results.set(`${x.type}\u0000${x.name}`, x);
  } else if (was === "end" && r) {
    await h.d.db.tx(async (tx) => {
      await record(tx, s, [...r.results.values()], at);
      if (r.template) await edgesRepo.snapshotDone(tx, sk, edge, s.edge.incarnation, JSON.stringify(r.template), r.job.kind === "full" ? r.seq : null);
      if (r.job.kind === "full") await edgesRepo.update(tx, sk, edge, { last_talked: nowSeconds() });
    });
    if (r.template) s.applied = r.template;
    if (r.job.kind === "full") s.cursor = r.seq;
    s.running = null;
    // the template changed again meanwhile
    s.wantTemplate();
  } else if (was === "log") {
    await h.d.db.tx(async (tx) => {
      await record(tx, s, m.results, at);
      // never past what was sent (an acknowledgement of something else is not a position)
      if (m.upTo > s.cursor && m.upTo <= s.sent) {
        s.cursor = m.upTo;
        await edgesRepo.update(tx, sk, edge, { cursor: m.upTo, last_talked: nowSeconds() });
      }
    });
  }
  await s.pump();
}

async function record(tx: Executor, s: EdgeSession, results: AssetResult[], at: string) {
  const sk = s.edge.system_key, edge = s.edge.name;
  for (const r of results) {
    const type = r.type === "row" ? "collection_rows" : r.type;
    const version = await versionOf(tx, sk, r);
    if (r.error) await statusRepo.failed(tx, sk, edge, type, r.name, version, r.error.slice(0, 2000), at);
    else await statusRepo.applied(tx, sk, edge, type, r.name, version, at);
  }
}

/** The asset version an edge's result is about: as the change carried it and the edge echoes
 *  it, else the version of the log entry at its position, else (a snapshot's position, or an
 *  entry compacted away) the asset's current version. */
export async function versionOf(ex: Executor, sk: string, r: AssetResult): Promise<number> {
  if (r.version) return r.version;
  return (await changesRepo.versionAt(ex, sk, r.seq, r.type, r.name)) || changesRepo.versionOf(ex, sk, r.type, r.name);
}
