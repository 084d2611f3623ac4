// The audit trail's thread (auditFile.ts): it holds the connection to the trail's own file and
// does what it is asked, one request at a time, in the order asked.
import { AUDIT_SCHEMA, auditRepo } from "./audit.ts";
import type { AuditAnswer, AuditRequest } from "./auditFile.ts";
import { type Db, openDb } from "./db.ts";
import { nativeFallbackDir } from "./native.ts";

declare const self: Worker;

let db: Db | null = null;
let queue: Promise<void> = Promise.resolve();

async function handle(m: AuditRequest): Promise<unknown> {
  if (m.t === "open") {
    nativeFallbackDir(m.nativeDir);
    db = await openDb({ url: `file:${m.path}` });
    for (const sql of AUDIT_SCHEMA) await db.run(sql);
    return null;
  }
  if (!db) throw new Error("the audit trail's file is not open");
  switch (m.t) {
    case "insert": await db.tx((tx) => auditRepo.insertMany(tx, m.rows)); return null;
    case "all": return db.all(m.sql, m.args);
    case "get": return db.get(m.sql, m.args);
    case "run": return db.run(m.sql, m.args);
    case "close": { const d = db; db = null; await d.close(); return null; }
  }
}

/** Integers past 2^53 come back as bigint (the trail's ids never get there): sent as text. */
const wire = (_k: string, v: unknown) => (typeof v === "bigint" ? v.toString() : v);

self.onmessage = (e: MessageEvent) => {
  const m = JSON.parse(e.data as string) as AuditRequest;
  queue = queue.then(async () => {
    let a: AuditAnswer;
    try { a = { id: m.id, ok: true, v: await handle(m) }; }
    catch (err) { a = { id: m.id, ok: false, error: err instanceof Error ? err.message : String(err) }; }
    postMessage(JSON.stringify(a, wire));
  });
};
