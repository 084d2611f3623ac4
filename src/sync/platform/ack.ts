// The edge's acknowledgements: a snapshot's pages and end, the log's batches. Its position moves
// (never past what was sent), and the outcome per asset it reports is recorded with the next batch
// of writes (writes.ts): a snapshot's once it is whole, with the template it brought.
import { nowIso } from "../../core/ids.ts";
import type { EdgeMessage } from "../protocol.ts";
import type { EdgeSession } from "./session.ts";
import type { HubState } from "./state.ts";

export async function ack(h: HubState, s: EdgeSession, m: Extract<EdgeMessage, { t: "ack" }>) {
  const sk = s.edge.system_key, edge = s.edge.name;
  const was = s.awaiting;
  s.awaiting = null;
  const r = s.running;
  if (was === "page" && r) {
    // a snapshot's outcomes count once it is whole
    for (const x of m.results) r.results.set(`${x.type}\u0000${x.name}`, x);
  } else if (was === "end" && r) {
    // written with the next batch, after the outcomes of batches acknowledged before (older)
    const full = r.job.kind === "full", template = r.template ? JSON.stringify(r.template) : null;
    if (full) s.cursor = r.seq;
    h.writes.snapshotEnded(s, [...r.results.values()], nowIso(), template, full);
    // (the record kept for hellos says it now)
    h.reads.snapshotDone(sk, edge, s.edge.incarnation, template, full ? r.seq : null);
    if (r.template) s.applied = r.template;
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
