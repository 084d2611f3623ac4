// src/store/auditFile.ts: the audit trail in a file of its own, written by a thread of its own, on
// a libSQL file database; in the database's own table anywhere else.
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseQuery } from "../../../src/core/query.ts";
import { type AuditValues, auditRepo } from "../../../src/store/audit.ts";
import { AuditFile, auditFileOf, openAuditStore } from "../../../src/store/auditFile.ts";
import { openDb } from "../../../src/store/db.ts";
import { migrate } from "../../../src/store/migrations.ts";

const root = mkdtempSync(join(tmpdir(), "outpost-audit-file-test-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let seq = 0;
const dir = () => { const d = join(root, String(++seq)); return d; };

const row = (systemKey: string, i: number, time = "2026-11-27T10:00:00.000Z"): AuditValues =>
  [systemKey, time, i, "collections", "Create", "dev@example.com", `item-${i}`, `{"n":${i}}`, "DEV"];

describe("where the trail goes", () => {
  test("a libSQL file: a file of its own beside the database, named after it", async () => {
    const d = dir();
    const db = await openDb({ url: `file:${join(d, "outpost.db")}` });
    try {
      expect(auditFileOf(db)).toBe(join(d, "outpost.audit.db"));
      const store = openAuditStore(db, () => join(d, "native"));
      expect(store).toBeInstanceOf(AuditFile);
      expect(store.hasRows()).toBe(false);
      await store.close();
      expect(existsSync(join(d, "outpost.audit.db"))).toBe(false); // nothing written, no thread, no file
    } finally { await db.close(); }
  });

  test("an in-memory database: the database's own table, on its connection", async () => {
    const db = await openDb({ url: ":memory:" });
    try {
      await migrate(db);
      expect(auditFileOf(db)).toBeNull();
      const store = openAuditStore(db, () => "unused");
      expect(store.executor).toBe(db);
      await store.insert([row("sys", 1), row("sys", 2)]);
      expect((await db.get<{ n: number }>("SELECT count(*) AS n FROM audit"))!.n).toBe(2);
    } finally { await db.close(); }
  });
});

describe("AuditFile", () => {
  test("rows written by its thread are read, counted, trimmed and removed through it, and kept across a close", async () => {
    const path = join(dir(), "outpost.audit.db");
    const f = new AuditFile(path, join(root, "native"), false);
    await f.insert(Array.from({ length: 1_234 }, (_, i) => row(i % 2 ? "a" : "b", i)));
    expect(f.hasRows()).toBe(true);
    expect(await auditRepo.count(f, "a", [])).toBe(617);
    expect(await auditRepo.count(f, null, [])).toBe(1_234);
    const newest = await auditRepo.list(f, "b", parseQuery(JSON.stringify({ PAGESIZE: 2, PAGENUM: 1 })));
    expect(newest.map((r) => [r.asset_id, r.response_time, r.changes, r.user_type])).toEqual([["item-1232", 1232, '{"n":1232}', "DEV"], ["item-1230", 1230, '{"n":1230}', "DEV"]]);
    expect(newest[0]!.id).toBe(1_233); // ids follow the order written
    await auditRepo.removeSystem(f, "b");
    expect(await auditRepo.count(f, null, [])).toBe(617);
    await f.insert([row("a", 9_999, "2020-01-01T00:00:00.000Z")]);
    await auditRepo.trim(f, "2021-01-01T00:00:00.000Z", 100);
    expect(await auditRepo.count(f, null, [])).toBe(100);
    await f.close();

    const again = new AuditFile(path, join(root, "native"), true);
    expect(again.hasRows()).toBe(true);
    expect(await auditRepo.count(again, null, [])).toBe(100);
    await again.insert([row("a", 5)]);
    expect(await auditRepo.count(again, "a", [])).toBe(101);
    await again.close();
  });

  test("a statement that fails answers its error, and the thread goes on", async () => {
    const f = new AuditFile(join(dir(), "x.audit.db"), join(root, "native"), false);
    await expect(f.all("SELECT * FROM nowhere")).rejects.toThrow(/no such table: nowhere/);
    await f.insert([row("s", 1)]);
    expect(await auditRepo.count(f, "s", [])).toBe(1);
    await f.close();
  });

  test("requests are done in the order asked: a read after an insert sees its rows", async () => {
    const f = new AuditFile(join(dir(), "o.audit.db"), join(root, "native"), false);
    const writes = Array.from({ length: 20 }, (_, k) => f.insert(Array.from({ length: 50 }, (_, i) => row("s", k * 50 + i))));
    const counted = auditRepo.count(f, "s", []); // asked before any write is answered
    expect(await counted).toBe(1_000);
    await Promise.all(writes);
    await f.close();
  });
});
