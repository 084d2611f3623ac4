// A whole fleet's edge records (no SORT, no page) are read a part at a time in name order, the
// event loop given back between parts, and the answer is the one a single read gives: every
// record once, in name order, with the query's filters and the failing flag. A sorted or paged
// query is read at once.
import { afterAll, beforeAll, describe, expect, spyOn, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type App, start } from "../../../src/app.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import { loadConfig } from "../../../src/config.ts";
import { edgesRepo } from "../../../src/store/edges.ts";

const FLEET = 2_345;
const dir = mkdtempSync(join(tmpdir(), "outpost-edges-list-"));
let app: App;
let dev: Principal;
let sk: string;
const names: string[] = [];

beforeAll(async () => {
  app = await start(loadConfig(["--db", `file:${join(dir, "db.sqlite")}`, "--http-port", "0", "--log-level", "silent"]));
  const s = app.services;
  const reg = await s.developers.register({ email: "list@example.com", password: "pw" });
  dev = (await s.tokens.resolve(reg.dev_token))!;
  sk = (await s.systems.create(dev, { name: "list" })).system_key;
  // names whose order is not the order they were made in
  for (let i = 0; i < FLEET; i++) names.push(`gw-${((i * 7919) % FLEET).toString(36)}-${i % 3}`);
  for (const name of names) await s.edges.create(dev, sk, name, { description: name.endsWith("-1") ? "one" : "other", token: "a-token-1" });
}, 120_000);
afterAll(async () => { await app?.stop(); rmSync(dir, { recursive: true, force: true }); });

const listed = async (query: string | null, failing?: boolean) => (await app.services.edges.list(dev, sk, query, { failing })).map((e) => e.name as string);
const byName = (a: string[]) => [...a].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));

describe("a whole fleet's list", () => {
  test("read in parts of 1,000, the event loop given back between them: every record once, in name order", async () => {
    const parts = spyOn(edgesRepo, "listPart");
    const whole = spyOn(edgesRepo, "list");
    let turns = 0, reading = true;
    const tick = () => { if (reading) { turns++; setImmediate(tick); } };
    setImmediate(tick);
    try {
      const got = await listed(null);
      reading = false;
      expect(got.length).toBe(FLEET);
      expect(got).toEqual(byName(names));
      expect(parts.mock.calls.length).toBe(3);
      expect(whole.mock.calls.length).toBe(0);
      expect(turns).toBeGreaterThanOrEqual(2);
    } finally {
      reading = false;
      parts.mockRestore();
      whole.mockRestore();
    }
  });

  test("with a filter, and with the failing flag, the parts answer what one read would", async () => {
    const filter = JSON.stringify({ FILTERS: [[{ EQ: [{ description: "one" }] }]] });
    expect(await listed(filter)).toEqual(byName(names.filter((n) => n.endsWith("-1"))));
    expect(await listed(null, false)).toEqual(byName(names));
    expect(await listed(null, true)).toEqual([]);
  });

  test("a sorted or paged query is read at once, as it asks", async () => {
    const parts = spyOn(edgesRepo, "listPart");
    try {
      const sorted = await listed(JSON.stringify({ SORT: [{ DESC: "name" }] }));
      expect(sorted).toEqual(byName(names).reverse());
      const page = await listed(JSON.stringify({ PAGESIZE: 10, PAGENUM: 2 }));
      expect(page).toEqual(byName(names).slice(10, 20));
      expect(parts.mock.calls.length).toBe(0);
    } finally {
      parts.mockRestore();
    }
  });

  test("a query the list cannot read is refused, part or not", async () => {
    await expect(listed(JSON.stringify({ FILTERS: [[{ EQ: [{ nosuchcolumn: 1 }] }]] }))).rejects.toThrow(/nosuchcolumn/);
    await expect(listed("{not json")).rejects.toThrow();
  });
});
