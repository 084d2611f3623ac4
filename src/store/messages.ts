// Message history and per-topic history settings.
//
// History is stored in pages: one row per (topic, write batch) holding its messages encoded one
// after another. A busy topic then costs one row write per batch instead of one per message
// (measured: 100,000 single-row inserts plus trimming take ~0.8 s of the broker's thread; pages
// a small fraction of that), and trimming drops whole pages.
import type { CompiledWhere } from "../core/query.ts";
import type { Executor } from "./db.ts";

export interface Message { time: number; qos: number; userid: string; ip: string; payload: Uint8Array }
/** A message with where it is stored: page id and index inside the page. */
export interface StoredMessage extends Message { page: number; index: number }
export interface PageRow { id: number; system_key: string; topic: string; first_time: number; last_time: number; count: number; data: Uint8Array }
export interface StorageRow { system_key: string; topic: string; max_rows: number; max_time: number; edge: number; platform: number }

// ---- page codec: per message  f64 time | u8 qos | u16 len userid | u16 len ip | u32 len payload

export function encodePage(messages: Message[]): Buffer {
  // userid and ip repeat across a batch: encode each distinct one once
  const text = new Map<string, Buffer>();
  const enc = (v: string) => { let b = text.get(v); if (!b) text.set(v, (b = Buffer.from(v))); return b; };
  let size = 0;
  for (const m of messages) size += 17 + enc(m.userid).length + enc(m.ip).length + m.payload.length;
  const b = Buffer.allocUnsafe(size);
  let o = 0;
  for (const m of messages) {
    const u = text.get(m.userid)!, ip = text.get(m.ip)!;
    b.writeDoubleLE(m.time, o); o += 8;
    b[o++] = m.qos;
    b.writeUInt16LE(u.length, o); o += 2; b.set(u, o); o += u.length;
    b.writeUInt16LE(ip.length, o); o += 2; b.set(ip, o); o += ip.length;
    b.writeUInt32LE(m.payload.length, o); o += 4; b.set(m.payload, o); o += m.payload.length;
  }
  return b;
}

export function decodePage(pageId: number, data: Uint8Array): StoredMessage[] {
  const b = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const out: StoredMessage[] = [];
  let o = 0;
  while (o < b.length) {
    const time = b.readDoubleLE(o); o += 8;
    const qos = b.readUInt8(o); o += 1;
    const ul = b.readUInt16LE(o); o += 2; const userid = b.toString("utf8", o, o + ul); o += ul;
    const il = b.readUInt16LE(o); o += 2; const ip = b.toString("utf8", o, o + il); o += il;
    const pl = b.readUInt32LE(o); o += 4; const payload = b.subarray(o, o + pl); o += pl;
    out.push({ time, qos, userid, ip, payload, page: pageId, index: out.length });
  }
  return out;
}

export const messagesRepo = {
  insertPage: (ex: Executor, systemKey: string, topic: string, messages: Message[]) =>
    ex.run(`INSERT INTO message_pages(system_key, topic, first_time, last_time, count, data) VALUES (?,?,?,?,?,?)`,
      [systemKey, topic, messages[0]!.time, messages[messages.length - 1]!.time, messages.length, encodePage(messages)]),

  /** Pages of a topic that may hold messages in [after, before], newest first. */
  pages: (ex: Executor, systemKey: string, topic: string, after: number | null, before: number | null) =>
    ex.all<PageRow>(`SELECT * FROM message_pages WHERE system_key = ? AND topic = ? AND last_time >= ? AND first_time <= ? ORDER BY last_time DESC, id DESC`,
      [systemKey, topic, after ?? -1, before ?? Number.MAX_SAFE_INTEGER]),

  /** Sizes of a topic's pages, oldest first (for trimming; without their data). */
  oldestPages: (ex: Executor, systemKey: string, topic: string) =>
    ex.all<{ id: number; count: number }>(`SELECT id, count FROM message_pages WHERE system_key = ? AND topic = ? ORDER BY last_time, id`, [systemKey, topic]),
  page: (ex: Executor, id: number) => ex.get<PageRow>(`SELECT * FROM message_pages WHERE id = ?`, [id]),

  deletePage: (ex: Executor, id: number) => ex.run(`DELETE FROM message_pages WHERE id = ?`, [id]),

  /** Rewrites a page with fewer messages (an empty list deletes it). */
  async rewritePage(ex: Executor, id: number, messages: Message[]) {
    if (!messages.length) return ex.run(`DELETE FROM message_pages WHERE id = ?`, [id]);
    return ex.run(`UPDATE message_pages SET first_time = ?, last_time = ?, count = ?, data = ? WHERE id = ?`,
      [messages[0]!.time, messages[messages.length - 1]!.time, messages.length, encodePage(messages), id]);
  },

  countTopic: async (ex: Executor, systemKey: string, topic: string) =>
    (await ex.get<{ n: number }>(`SELECT coalesce(sum(count), 0) AS n FROM message_pages WHERE system_key = ? AND topic = ?`, [systemKey, topic]))!.n,

  /** Whole pages older than `before` (partly older pages are left to the caller). */
  deletePagesBefore: (ex: Executor, before: number) => ex.run(`DELETE FROM message_pages WHERE last_time < ?`, [before]),
  deleteTopicPagesBefore: (ex: Executor, systemKey: string, topic: string, before: number) =>
    ex.run(`DELETE FROM message_pages WHERE system_key = ? AND topic = ? AND last_time < ?`, [systemKey, topic, before]),
  /** Pages that straddle a cut-off time. */
  pagesStraddling: (ex: Executor, before: number) =>
    ex.all<PageRow>(`SELECT * FROM message_pages WHERE first_time < ? AND last_time >= ?`, [before, before]),

  /** Topics with history: `topicid`, message count and last publish time. */
  topics: (ex: Executor, systemKey: string, where: CompiledWhere, orderAndLimit: string) =>
    ex.all<{ topicid: string; message_count: number; last_time: number }>(
      `SELECT * FROM (SELECT topic AS topicid, sum(count) AS message_count, max(last_time) AS last_time FROM message_pages WHERE system_key = ? GROUP BY topic) WHERE ${where.sql}${orderAndLimit}`,
      [systemKey, ...where.args]),
  topicCount: async (ex: Executor, systemKey: string, where: CompiledWhere) =>
    (await ex.get<{ n: number }>(`SELECT count(*) AS n FROM (SELECT topic AS topicid, sum(count) AS message_count, max(last_time) AS last_time FROM message_pages WHERE system_key = ? GROUP BY topic) WHERE ${where.sql}`, [systemKey, ...where.args]))!.n,

  storage: (ex: Executor, systemKey: string) => ex.all<StorageRow>(`SELECT * FROM message_storage WHERE system_key = ? ORDER BY topic`, [systemKey]),
  allStorage: (ex: Executor) => ex.all<StorageRow>(`SELECT * FROM message_storage`),
  putStorage: (ex: Executor, s: StorageRow) =>
    ex.run(`INSERT INTO message_storage(system_key, topic, max_rows, max_time, edge, platform) VALUES (?,?,?,?,?,?)
      ON CONFLICT(system_key, topic) DO UPDATE SET max_rows = excluded.max_rows, max_time = excluded.max_time, edge = excluded.edge, platform = excluded.platform`,
      [s.system_key, s.topic, s.max_rows, s.max_time, s.edge, s.platform]),
};
