// Platform nodes sharing one database: their heartbeats, and which node holds which edge.
import type { Executor } from "./db.ts";

export interface NodeRow { node_id: string; started_at: number; heartbeat_at: number; clustered: number }

export const clusterRepo = {
  /** Records this node's heartbeat (ms), inserting its row on the first one. */
  beat: (ex: Executor, nodeId: string, startedAt: number, at: number, clustered: boolean) =>
    ex.run(`INSERT INTO cluster_nodes(node_id, started_at, heartbeat_at, clustered) VALUES (?, ?, ?, ?)
      ON CONFLICT(node_id) DO UPDATE SET started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, clustered = excluded.clustered`,
      [nodeId, startedAt, at, clustered ? 1 : 0]),
  /** Nodes whose heartbeat is at or after `since` (ms). */
  alive: (ex: Executor, since: number) =>
    ex.all<NodeRow>(`SELECT node_id, started_at, heartbeat_at, clustered FROM cluster_nodes WHERE heartbeat_at >= ? ORDER BY node_id`, [since]),
  /** A node stopping: its row goes (a clean stop is not a death). */
  leave: (ex: Executor, nodeId: string) => ex.run(`DELETE FROM cluster_nodes WHERE node_id = ?`, [nodeId]),
  /** Edges a node held are disconnected: at its start (all it held before), or as it stops
   *  (`lastTalked`: they were heard until then). */
  releaseEdgesOf: (ex: Executor, nodeId: string, lastTalked?: number) => lastTalked === undefined
    ? ex.run(`UPDATE edges SET is_connected = 0, node_id = '' WHERE node_id = ?`, [nodeId])
    : ex.run(`UPDATE edges SET is_connected = 0, node_id = '', last_talked = ? WHERE node_id = ? AND is_connected = 1`, [lastTalked, nodeId]),
  /** Edges marked connected to a node that is not among the living (or to none: rows from before
   *  nodes were recorded), given the ids of the living. */
  releaseEdgesOfDead: (ex: Executor, alive: string[]) =>
    ex.run(`UPDATE edges SET is_connected = 0, node_id = '' WHERE is_connected = 1 AND node_id NOT IN (${alive.map(() => "?").join(", ") || "''"})`, alive),
  /** The edge's connection to this node ended: disconnected, unless it has moved to another node. */
  releaseEdge: (ex: Executor, systemKey: string, edge: string, nodeId: string, lastTalked: number) =>
    ex.run(`UPDATE edges SET is_connected = 0, node_id = '', last_talked = ? WHERE system_key = ? AND name = ? AND node_id IN (?, '')`, [lastTalked, systemKey, edge, nodeId]),
  /** Which node holds an edge's connection ('' or undefined: none). */
  holderOf: async (ex: Executor, systemKey: string, edge: string) =>
    (await ex.get<{ node_id: string; is_connected: number }>(`SELECT node_id, is_connected FROM edges WHERE system_key = ? AND name = ?`, [systemKey, edge])),
  /** Drops rows of nodes silent since before `before` (ms). */
  forgetDead: (ex: Executor, before: number) => ex.run(`DELETE FROM cluster_nodes WHERE heartbeat_at < ?`, [before]),
};
