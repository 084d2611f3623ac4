// Message history and per-topic history settings.
import type { CompiledWhere } from "../core/query.ts";
import type { Executor } from "./db.ts";

export interface MessageRow { id: number; system_key: string; topic: string; payload: Uint8Array | null; time: number; userid: string; ip: string; qos: number }
export type NewMessage = Omit<MessageRow, "id">;
export interface StorageRow { system_key: string; topic: string; max_rows: number; max_time: number; edge: number; platform: number }

/** Selects the messages of a topic: `after`/`before` in epoch ms, newest first, `limit` 0 = all. */
function range(systemKey: string, topic: string, after: number | null, before: number | null) {
  const args: unknown[] = [systemKey, topic];
  let sql = `system_key = ? AND topic = ?`;
  if (after !== null) { sql += ` AND time >= ?`; args.push(after); }
  if (before !== null) { sql += ` AND time <= ?`; args.push(before); }
  return { sql, args };
}

const INSERT_WIDTH = 7;
const PER_STATEMENT = 400;

export const messagesRepo = {
  /** Many messages in few statements (the history writer batches). */
  async insertMany(ex: Executor, rows: NewMessage[]) {
    for (let i = 0; i < rows.length; i += PER_STATEMENT) {
      const chunk = rows.slice(i, i + PER_STATEMENT);
      const args: unknown[] = [];
      for (const r of chunk) args.push(r.system_key, r.topic, r.payload, r.time, r.userid, r.ip, r.qos);
      await ex.run(`INSERT INTO messages(system_key, topic, payload, time, userid, ip, qos) VALUES ${Array(chunk.length).fill(`(${Array(INSERT_WIDTH).fill("?").join(",")})`).join(",")}`, args);
    }
  },
  history(ex: Executor, systemKey: string, topic: string, after: number | null, before: number | null, limit: number) {
    const r = range(systemKey, topic, after, before);
    return ex.all<MessageRow>(`SELECT * FROM messages WHERE ${r.sql} ORDER BY time DESC, id DESC${limit > 0 ? ` LIMIT ${limit}` : ""}`, r.args);
  },
  /** Deletes what history() would return; returns the deleted rows. */
  deleteHistory(ex: Executor, systemKey: string, topic: string, after: number | null, before: number | null, limit: number) {
    const r = range(systemKey, topic, after, before);
    return ex.all<MessageRow>(`DELETE FROM messages WHERE id IN (SELECT id FROM messages WHERE ${r.sql} ORDER BY time DESC, id DESC${limit > 0 ? ` LIMIT ${limit}` : ""}) RETURNING *`, r.args);
  },
  countTopic: async (ex: Executor, systemKey: string, topic: string) =>
    (await ex.get<{ n: number }>(`SELECT count(*) AS n FROM messages WHERE system_key = ? AND topic = ?`, [systemKey, topic]))!.n,
  /** Keeps the newest `keep` messages of a topic. */
  trimTopic: (ex: Executor, systemKey: string, topic: string, keep: number) =>
    ex.run(`DELETE FROM messages WHERE system_key = ? AND topic = ? AND id <= (SELECT id FROM messages WHERE system_key = ? AND topic = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`,
      [systemKey, topic, systemKey, topic, keep]),
  deleteOlderThan: (ex: Executor, before: number) => ex.run(`DELETE FROM messages WHERE time < ?`, [before]),
  deleteTopicOlderThan: (ex: Executor, systemKey: string, topic: string, before: number) =>
    ex.run(`DELETE FROM messages WHERE system_key = ? AND topic = ? AND time < ?`, [systemKey, topic, before]),

  /** Topics with history: `topicid`, message count and last publish time. */
  topics: (ex: Executor, systemKey: string, where: CompiledWhere, orderAndLimit: string) =>
    ex.all<{ topicid: string; message_count: number; last_time: number }>(
      `SELECT * FROM (SELECT topic AS topicid, count(*) AS message_count, max(time) AS last_time FROM messages WHERE system_key = ? GROUP BY topic) WHERE ${where.sql}${orderAndLimit}`,
      [systemKey, ...where.args]),
  topicCount: async (ex: Executor, systemKey: string, where: CompiledWhere) =>
    (await ex.get<{ n: number }>(`SELECT count(*) AS n FROM (SELECT topic AS topicid FROM messages WHERE system_key = ? GROUP BY topic) WHERE ${where.sql}`, [systemKey, ...where.args]))!.n,

  storage: (ex: Executor, systemKey: string) => ex.all<StorageRow>(`SELECT * FROM message_storage WHERE system_key = ? ORDER BY topic`, [systemKey]),
  allStorage: (ex: Executor) => ex.all<StorageRow>(`SELECT * FROM message_storage`),
  putStorage: (ex: Executor, s: StorageRow) =>
    ex.run(`INSERT INTO message_storage(system_key, topic, max_rows, max_time, edge, platform) VALUES (?,?,?,?,?,?)
      ON CONFLICT(system_key, topic) DO UPDATE SET max_rows = excluded.max_rows, max_time = excluded.max_time, edge = excluded.edge, platform = excluded.platform`,
      [s.system_key, s.topic, s.max_rows, s.max_time, s.edge, s.platform]),
};
