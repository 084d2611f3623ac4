// The edge's acknowledgements: a snapshot's pages and end, the log's batches. Its position moves
// (never past what was sent), and the outcome per asset it reports is recorded: a snapshot's at
// once, with its end; the log's with the next batch of writes (writes.ts).
import { nowIso, nowSeconds } from "../../core/ids.ts";
import { edgesRepo } from "../../store/edges.ts";
import type { EdgeMessage } from "../protocol.ts";
import type { EdgeSession } from "./session.ts";
import type { HubState } from "./state.ts";
import { record } from "./writes.ts";

export async function ack(h: HubState, s: EdgeSession, m: Extract<EdgeMessage, { t: "ack" }>) {
  const sk = s.edge.system_key, edge = s.edge.name;
  const was = s.awaiting;
  s.awaiting = null;
  const r = s.running;
  if (was === "page" && r) {
    // a snapshot's outcomes count once it is whole
    for (const x of m.results) r.results.set(`${x.type}\u0000${x.name}`, x);
  } else if (was === "end" && r) {
    // the outcomes of batches acknowledged before are older than the snapshot's
    await h.writes.flushOne(s);
    await h.d.db.tx(async (tx) => {
      await record(tx, sk, edge, [...r.results.values()], nowIso());
      if (r.template) await edgesRepo.snapshotDone(tx, sk, edge, s.edge.incarnation, JSON.stringify(r.template), r.job.kind === "full" ? r.seq : null);
      if (r.job.kind === "full") await edgesRepo.update(tx, sk, edge, { last_talked: nowSeconds() });
    });
    // (the record kept for hellos has the applied template of before)
    h.reads.forgetRecord(sk, edge);
    if (r.template) s.applied = r.template;
    if (r.job.kind === "full") s.cursor = r.seq;
    s.running = null;
    // the template changed again meanwhile
    s.wantTemplate();
  } else if (was === "log") {
    // never past what was sent (an acknowledgement of something else is not a position)
    const moved = m.upTo > s.cursor && m.upTo <= s.sent;
    if (moved) s.cursor = m.upTo;
    // (the time only for outcomes: an acknowledgement without any is what a fleet sends most)
    if (moved || m.results.length) h.writes.acknowledged(s, moved, m.results, m.results.length ? nowIso() : "");
  }
  await s.pump();
}
