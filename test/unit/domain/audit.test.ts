// The audit trail in-process: rows written in order by flush, none before it (off the request's
// path), read newest first with the query language, and trimmed to the retention bounds.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type App, start } from "../../../src/app.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import { loadConfig } from "../../../src/config.ts";
import { type AuditEntry, AuditTrail } from "../../../src/domain/audit.ts";
import type { DomainDeps } from "../../../src/domain/deps.ts";
import { EventBus } from "../../../src/core/events.ts";
import { Signals } from "../../../src/core/signals.ts";

let app: App;
let dev: Principal, sk: string;
const entry = (i: number, at: number, systemKey = sk): AuditEntry => ({
  systemKey, assetClass: "collections", action: "Create", email: "d@example.com", userType: "DEV", assetId: `a${i}`, changes: `{"n":${i}}`, responseMs: 1.4, at,
});

beforeAll(async () => {
  app = await start(loadConfig(["--db", ":memory:", "--http-port", "0", "--mqtt-port", "0", "--mqtt-ws-port", "0", "--log-level", "silent", "--audit", "off"]));
  const s = app.services;
  dev = (await s.tokens.resolve((await s.developers.register({ email: "audit@example.com", password: "pw" })).dev_token))!;
  sk = (await s.systems.create(dev, { name: "a1" })).system_key;
});
afterAll(() => app.stop());

const trail = (opts: { retentionDays?: number; maxRows?: number } = {}) =>
  new AuditTrail({ db: app.db, log: app.log, events: new EventBus(), signals: new Signals() } as unknown as DomainDeps, app.services.systems, { enabled: true, retentionDays: opts.retentionDays ?? 30, maxRows: opts.maxRows ?? 1_000_000 });

test("recorded rows wait for a flush, then read newest first; filters and counts", async () => {
  const a = trail();
  const now = Date.now();
  for (let i = 0; i < 5; i++) a.record(entry(i, now));
  expect((await app.db.get<{ n: number }>("SELECT count(*) AS n FROM audit"))!.n).toBe(0);
  expect(a.waitingRows).toBe(5); // (on /metrics)
  const rows = await a.list(dev, sk, null);
  expect(a.waitingRows).toBe(0);
  expect(a.dropped).toBe(0);
  expect(rows.map((r) => r.asset_id)).toEqual(["a4", "a3", "a2", "a1", "a0"]);
  expect(rows[0]).toMatchObject({ system_key: sk, asset_class: "collections", action_type: "Create", response_time: 1, user_type: "DEV", changes: '{"n":4}' });
  expect(await a.count(dev, sk, JSON.stringify({ FILTERS: [[{ EQ: [{ action_type: "CREATE" }] }, { EQ: [{ asset_id: "a2" }] }]] }))).toEqual({ count: 1 });
  await a.stop();
});

test("a disabled trail records nothing", async () => {
  const off = new AuditTrail({ db: app.db, log: app.log, events: new EventBus(), signals: new Signals() } as unknown as DomainDeps, app.services.systems, { enabled: false, retentionDays: 1, maxRows: 1000 });
  const before = (await app.db.get<{ n: number }>("SELECT count(*) AS n FROM audit"))!.n;
  off.record(entry(99, Date.now()));
  await off.flush();
  expect((await app.db.get<{ n: number }>("SELECT count(*) AS n FROM audit"))!.n).toBe(before);
});

test("trimmed at start: rows past the retention and the oldest past the row cap go", async () => {
  await app.db.run("DELETE FROM audit");
  const a = trail();
  const day = 86_400_000, now = Date.now();
  for (let i = 0; i < 10; i++) a.record(entry(i, now - 40 * day));
  for (let i = 10; i < 1_600; i++) a.record(entry(i, now));
  await a.stop();
  expect((await app.db.get<{ n: number }>("SELECT count(*) AS n FROM audit"))!.n).toBe(1_600);
  const bounded = trail({ retentionDays: 30, maxRows: 1_000 });
  await bounded.start();
  const left = await app.db.all<{ asset_id: string }>("SELECT asset_id FROM audit ORDER BY id");
  expect(left.length).toBe(1_000);
  expect(left[0]!.asset_id).toBe("a600");
  expect(left.at(-1)!.asset_id).toBe("a1599");
  await bounded.stop();
});
