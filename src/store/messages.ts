// Message history and per-topic history settings.
//
// History is stored in pages: one row per (topic, write batch) holding its messages encoded one
// after another, cut at PAGE_BYTES. A busy topic then costs one row write per batch instead of one
// per message (measured: 100,000 single-row inserts plus trimming take ~0.8 s of the broker's
// thread; pages a small fraction of that), and trimming drops whole pages.
import { type ColumnMap, type Condition, type Query, compileWhere } from "../core/query.ts";
import type { Executor } from "./db.ts";
import { listClauses } from "./sql.ts";

export interface Message { time: number; qos: number; userid: string; ip: string; payload: Uint8Array }
/** A message with where it is stored: page id and index inside the page. */
export interface StoredMessage extends Message { page: number; index: number }
export interface PageRow { id: number; system_key: string; topic: string; first_time: number; last_time: number; count: number; data: Uint8Array }
/** A page without its messages. */
export type PageMeta = Pick<PageRow, "id" | "first_time" | "last_time" | "count">;

/** The topics with history of a system (its key the one argument), as a table to query. */
const TOPICS = `(SELECT topic AS topicid, sum(count) AS message_count, max(last_time) AS last_time FROM message_pages WHERE system_key = ? GROUP BY topic) AS topics`;
/** What a query of topics may name. */
const TOPIC_COLUMNS: ColumnMap = {
  topicid: { sql: "topicid", type: "string" },
  message_count: { sql: "message_count", type: "int" },
  last_time: { sql: "last_time", type: "int" },
};

/** Most bytes of messages per page (a single bigger message gets a page of its own): a read of a
 *  topic's last few messages reads about this much whatever the rate the topic was written at. */
export const PAGE_BYTES = 64 * 1024;
export interface StorageRow { system_key: string; topic: string; max_rows: number; max_time: number; edge: number; platform: number }

// ---- page codec: per message  f64 time | u8 qos | u16 len userid | u16 len ip | u32 len payload

const encodedSize = (m: Message) => 17 + Buffer.byteLength(m.userid) + Buffer.byteLength(m.ip) + m.payload.length;

/** A batch of one topic's messages cut into pages of at most PAGE_BYTES. */
export function splitPages<M extends Message>(messages: M[]): M[][] {
  const out: M[][] = [];
  let page: M[] = [];
  let bytes = 0;
  for (const m of messages) {
    const n = encodedSize(m);
    if (page.length && bytes + n > PAGE_BYTES) { out.push(page); page = []; bytes = 0; }
    page.push(m);
    bytes += n;
  }
  if (page.length) out.push(page);
  return out;
}

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
  const out: StoredMessage[] = [];
  scanPage(data, (_time, at) => { out.push(messageAt(pageId, data, at, out.length)); });
  return out;
}

/** Visits each message of a page, oldest first, with its time and where it starts, without
 *  decoding it (a read wanting a few messages of a page decodes only those, with messageAt). */
export function scanPage(data: Uint8Array, visit: (time: number, at: number) => void) {
  const b = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  let o = 0;
  while (o < b.length) {
    const at = o;
    const time = b.readDoubleLE(o); o += 9;
    o += 2 + b.readUInt16LE(o);
    o += 2 + b.readUInt16LE(o);
    o += 4 + b.readUInt32LE(o);
    visit(time, at);
  }
}

/** The message starting at `at` of a page (the index-th of it). */
export function messageAt(pageId: number, data: Uint8Array, at: number, index: number): StoredMessage {
  const b = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  let o = at;
  const time = b.readDoubleLE(o); o += 8;
  const qos = b.readUInt8(o); o += 1;
  const ul = b.readUInt16LE(o); o += 2; const userid = b.toString("utf8", o, o + ul); o += ul;
  const il = b.readUInt16LE(o); o += 2; const ip = b.toString("utf8", o, o + il); o += il;
  const pl = b.readUInt32LE(o); o += 4;
  return { time, qos, userid, ip, payload: b.subarray(o, o + pl), page: pageId, index };
}

export const messagesRepo = {
  /** Writes a batch of one topic's messages, in pages of at most PAGE_BYTES. */
  async insertPages(ex: Executor, systemKey: string, topic: string, messages: Message[]) {
    for (const page of splitPages(messages))
      await ex.run(`INSERT INTO message_pages(system_key, topic, first_time, last_time, count, data) VALUES (?,?,?,?,?,?)`,
        [systemKey, topic, page[0]!.time, page[page.length - 1]!.time, page.length, encodePage(page)]);
  },

  /** Up to `limit` pages of a topic that may hold messages in [after, before], newest first (by
   *  last time, then id), starting after the page `from` (null: from the newest); without their
   *  messages (pageData reads those of the pages a caller needs). */
  pages: (ex: Executor, systemKey: string, topic: string, after: number | null, before: number | null, from: PageMeta | null, limit: number) =>
    ex.all<PageMeta>(`SELECT id, first_time, last_time, count FROM message_pages WHERE system_key = ? AND topic = ? AND last_time >= ? AND last_time <= ?
      AND first_time <= ? AND (last_time < ? OR id < ?) ORDER BY last_time DESC, id DESC LIMIT ?`,
    [systemKey, topic, after ?? -1, from?.last_time ?? Number.MAX_SAFE_INTEGER, before ?? Number.MAX_SAFE_INTEGER,
      from?.last_time ?? Number.MAX_SAFE_INTEGER, from?.id ?? Number.MAX_SAFE_INTEGER, limit]),
  pageData: async (ex: Executor, id: number) => (await ex.get<{ data: Uint8Array }>(`SELECT data FROM message_pages WHERE id = ?`, [id]))?.data,

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
  /** Topics with history that a parsed query selects, ordered by its SORT then topicid. */
  topics(ex: Executor, systemKey: string, q: Query) {
    const { where, tail } = listClauses(ex.dialect, q, TOPIC_COLUMNS, "topicid");
    return ex.all<{ topicid: string; message_count: number; last_time: number }>(
      `SELECT * FROM ${TOPICS} WHERE ${where.sql}${tail}`, [systemKey, ...where.args]);
  },
  /** The number of topics with history that `filters` match. */
  async topicCount(ex: Executor, systemKey: string, filters: Condition[][]) {
    const where = compileWhere(filters, TOPIC_COLUMNS, ex.dialect);
    return (await ex.get<{ n: number }>(`SELECT count(*) AS n FROM ${TOPICS} WHERE ${where.sql}`, [systemKey, ...where.args]))!.n;
  },

  storage: (ex: Executor, systemKey: string) => ex.all<StorageRow>(`SELECT * FROM message_storage WHERE system_key = ? ORDER BY topic`, [systemKey]),
  allStorage: (ex: Executor) => ex.all<StorageRow>(`SELECT * FROM message_storage`),
  putStorage: (ex: Executor, s: StorageRow) =>
    ex.run(`INSERT INTO message_storage(system_key, topic, max_rows, max_time, edge, platform) VALUES (?,?,?,?,?,?)
      ON CONFLICT(system_key, topic) DO UPDATE SET max_rows = excluded.max_rows, max_time = excluded.max_time, edge = excluded.edge, platform = excluded.platform`,
      [s.system_key, s.topic, s.max_rows, s.max_time, s.edge, s.platform]),
};
