// Each edge's recent link events (connected, disconnected, refused), the newest LINK_EVENTS_KEPT
// per edge.
import type { Executor } from "./db.ts";

/** events kept per edge */
export const LINK_EVENTS_KEPT = 100;

export interface LinkEventRow { id: number; system_key: string; edge_name: string; time: string; event: string; detail: string }
export type NewLinkEvent = Omit<LinkEventRow, "id">;

export const linkEventsRepo = {
  /** Appends an event of an edge that exists (one deleted meanwhile gets none: its events went
   *  with it). */
  add: (ex: Executor, e: NewLinkEvent) =>
    ex.run(`INSERT INTO edge_link_events(system_key, edge_name, time, event, detail) SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM edges WHERE system_key = ? AND name = ?)`,
      [e.system_key, e.edge_name, e.time, e.event, e.detail, e.system_key, e.edge_name]),

  /** Drops an edge's events older than its newest `keep`. */
  trim: (ex: Executor, systemKey: string, edge: string, keep = LINK_EVENTS_KEPT) =>
    ex.run(`DELETE FROM edge_link_events WHERE system_key = ? AND edge_name = ? AND id <= (SELECT id FROM edge_link_events WHERE system_key = ? AND edge_name = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`,
      [systemKey, edge, systemKey, edge, keep]),

  /** An edge's newest events, newest first. */
  latest: (ex: Executor, systemKey: string, edge: string, limit: number) =>
    ex.all<LinkEventRow>(`SELECT * FROM edge_link_events WHERE system_key = ? AND edge_name = ? ORDER BY id DESC LIMIT ?`, [systemKey, edge, limit]),

  deleteEdge: (ex: Executor, systemKey: string, edge: string) =>
    ex.run(`DELETE FROM edge_link_events WHERE system_key = ? AND edge_name = ?`, [systemKey, edge]),
};
