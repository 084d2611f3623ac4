// Message history reads in-process: `count` bounds what a read takes from the database (the last
// 10 of a long history read about one page, not the whole topic), and the newest messages are
// found exactly even when pages overlap in time or share their times.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type App, start } from "../../../src/app.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import { loadConfig } from "../../../src/config.ts";
import { type Message, PAGE_BYTES, messagesRepo } from "../../../src/store/messages.ts";

let app: App;
let dev: Principal;
let systemKey: string;

beforeAll(async () => {
  app = await start(loadConfig(["--db", ":memory:", "--http-port", "0", "--mqtt-port", "0", "--mqtt-ws-port", "0", "--log-level", "silent", "--history-max-rows", "1000000"]));
  const reg = await app.services.developers.register({ email: "history@example.com", password: "pw" });
  dev = (await app.services.tokens.resolve(reg.dev_token))!;
  systemKey = (await app.services.systems.create(dev, { name: "history" })).system_key;
});
afterAll(() => app.stop());

const params = (p: Record<string, string | number>) => Object.fromEntries(Object.entries(p).map(([k, v]) => [k, String(v)]));
const history = (p: Record<string, string | number>) => app.services.messages.history(dev, systemKey, params(p));

/** Bytes of message data the database hands back while `fn` runs. */
async function bytesRead(fn: () => Promise<unknown>): Promise<number> {
  const db = app.services.db;
  const { all, get } = db;
  let bytes = 0;
  const count = (rows: unknown[]) => { for (const r of rows) for (const v of Object.values(r as object)) if (v instanceof Uint8Array) bytes += v.byteLength; };
  db.all = async (sql, args) => { const rows = await all.call(db, sql, args); count(rows); return rows as never; };
  db.get = async (sql, args) => { const row = await get.call(db, sql, args); if (row) count([row]); return row as never; };
  try { await fn(); } finally { db.all = all; db.get = get; }
  return bytes;
}

async function fill(topic: string, n: number) {
  const m = app.services.messages;
  for (let i = 0; i < n; i++) {
    m.record(systemKey, topic, Buffer.from(`${topic}-${String(i).padStart(7, "0")}-${"x".repeat(80)}`), "someone", "127.0.0.1", 0);
    if (i % 4000 === 3999) await m.flush();
  }
  await m.flush();
}

describe("history reads", () => {
  test("the last 10 of 100,000 messages read about what the last 10 of 1,000 do", async () => {
    await fill("short", 1_000);
    await fill("long", 100_000);
    for (const topic of ["short", "long"]) {
      const n = topic === "short" ? 1_000 : 100_000;
      const got = await history({ topic, count: 10 });
      expect(got.map((r) => r.payload.slice(0, topic.length + 8))).toEqual(Array.from({ length: 10 }, (_, i) => `${topic}-${String(n - 1 - i).padStart(7, "0")}`));
    }
    const short = await bytesRead(() => history({ topic: "short", count: 10 }));
    const long = await bytesRead(() => history({ topic: "long", count: 10 }));
    // a few pages whatever the length of the history (the newest pages may hold only a few
    // messages each when flushes cut the batches, more so on a busy machine, and pages close in
    // time are read together): the long history holds about 10 MB, 150 pages; the short one about
    // 2 pages, all of it. 3.7 pages were read once under load: the bound is 6, against 150.
    expect(short).toBeGreaterThan(0);
    expect(long).toBeLessThanOrEqual(6 * PAGE_BYTES);
    // count 0 is everything there is
    expect((await history({ topic: "short", count: 0 })).length).toBe(1_000);
    expect((await history({ topic: "long", count: 2_500 })).at(-1)!.payload.slice(0, 12)).toBe(`long-${String(100_000 - 2_500).padStart(7, "0")}`);
  }, 60_000); // writing 100,000 messages takes a second or two, more on a busy machine

  test("exact across pages that overlap in time and share times", async () => {
    const topic = "overlap";
    const at = (t: number, tag: string): Message => ({ time: t, qos: 0, userid: "u", ip: "", payload: Buffer.from(tag) });
    const db = app.services.db;
    // written in this order (page ids ascending); times interleave between pages
    await messagesRepo.insertPages(db, systemKey, topic, [at(1_000, "a1"), at(5_000, "a5"), at(9_000, "a9")]);
    await messagesRepo.insertPages(db, systemKey, topic, [at(2_000, "b2"), at(8_000, "b8")]);
    await messagesRepo.insertPages(db, systemKey, topic, [at(7_000, "c7"), at(9_000, "c9")]);
    await messagesRepo.insertPages(db, systemKey, topic, Array.from({ length: 50 }, (_, i) => at(3_000 + i, `d${i}`)));
    const texts = async (p: Record<string, string | number>) => (await history({ topic, ...p })).map((r) => r.payload);
    // equal times: the later page first
    expect(await texts({ count: 4 })).toEqual(["c9", "a9", "b8", "c7"]);
    expect(await texts({ count: 6 })).toEqual(["c9", "a9", "b8", "c7", "a5", "d49"]);
    // a window: stop (whole seconds) bounds from above, start from below
    expect(await texts({ count: 3, stop: 7 })).toEqual(["c7", "a5", "d49"]);
    expect(await texts({ count: 0, start: 7, stop: 8 })).toEqual(["b8", "c7"]);
    expect((await texts({ count: 0 })).length).toBe(57);
  });
});
