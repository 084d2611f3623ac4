// A change's fan-out at its cost per edge: the positions a fleet acknowledged are written one
// statement per position (each edge keeps its own), a read of the log is kept once done until the
// log moves, and a session whose read is at hand sends at once, with no await of its own.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { App } from "../../../../src/app.ts";
import type { Principal } from "../../../../src/auth/principal.ts";
import { edgesRepo } from "../../../../src/store/edges.ts";
import type { ChangeRow } from "../../../../src/store/sync.ts";
import type { SyncHub } from "../../../../src/sync/platform/hub.ts";
import { EdgeSession, type SessionHub } from "../../../../src/sync/platform/session.ts";
import type { HubState } from "../../../../src/sync/platform/state.ts";
import { startHubApp } from "../hubApp.ts";

let app: App;
let hub: SyncHub;
let dev: Principal;
let sk: string;

beforeAll(async () => ({ app, hub, dev, sk } = await startHubApp("fanout")));
afterAll(() => app.stop());

const row = (seq: number): ChangeRow => ({ seq, system_key: "sk", asset_type: "row", asset_name: "f", item_id: `i${seq}`, op: "upsert", version: 1, hlc: `${seq}`, origin: "", body: `{"v":${seq}}` });
const TEMPLATE = [{ def_module: "collection", def_name: "f", mode: "sync_to_edge" }] as never;

/** A session on a hub whose reads of the log are `done` (at once) or come from `reading` (later). */
function session(done: Map<number, ChangeRow[]>, reading: (after: number) => Promise<ChangeRow[]>) {
  const sent: string[] = [];
  const h = {
    d: { log: { error() {} } },
    wireText: (r: ChangeRow) => `{"seq":${r.seq}}`,
    logAfter: (_sk: string, after: number) => reading(after),
    logRead: (_sk: string, after: number) => done.get(after),
    sameBatch: () => undefined,
    keepBatch: () => {},
    snapshots: null,
  } as unknown as SessionHub;
  const s = new EdgeSession(h, { send: (t: string) => { sent.push(t); }, close() {} });
  s.edge = { system_key: "sk", name: "e" } as never;
  s.template = TEMPLATE;
  s.applied = TEMPLATE;
  return { s, sent };
}

describe("a change's fan-out", () => {
  test("positions acknowledged together: each edge keeps its own, one heard from keeps its position", async () => {
    for (const n of ["at-5", "at-5b", "at-9", "only-heard"]) await app.services.edges.create(dev, sk, n, { token: `${n}-token` });
    await app.db.tx((tx) => edgesRepo.talked(tx, sk, 1_000, [{ name: "at-5", cursor: 5 }, { name: "at-9", cursor: 9 }, { name: "only-heard", cursor: null }, { name: "at-5b", cursor: 5 }]));
    const got = async (n: string) => { const r = (await edgesRepo.get(app.db, sk, n))!; return [r.cursor, r.last_talked]; };
    expect(await got("at-5")).toEqual([5, 1_000]);
    expect(await got("at-5b")).toEqual([5, 1_000]);
    expect(await got("at-9")).toEqual([9, 1_000]);
    expect(await got("only-heard")).toEqual([0, 1_000]);
  });

  test("a read of the log is at hand once done, and not after the log moved", async () => {
    const st = (hub as unknown as { st: HubState }).st;
    const col = await app.services.collections.createCollection(dev, { name: "fan", appID: sk, columns: [{ name: "v", type: "int" }] });
    await app.services.collections.insert(dev, await app.services.collections.byIdFor(dev, col.collectionID as string), [{ v: 1 }]);
    expect(st.logRead(sk, 0, 250)).toBeUndefined();
    const rows = await st.logAfter(sk, 0, 250);
    expect(rows.length).toBeGreaterThan(0);
    expect(st.logRead(sk, 0, 250)).toBe(rows);
    st.logMoved(sk);
    expect(st.logRead(sk, 0, 250)).toBeUndefined();
  });

  test("a session whose read is at hand sends before pump returns; one whose read is not, once it is", async () => {
    const at = session(new Map([[0, [row(1), row(2)]]]), () => Promise.reject(new Error("not read again")));
    const p = at.s.pump();
    expect(at.sent).toEqual(['{"t":"batch","changes":[{"seq":1},{"seq":2}],"upTo":2,"snapshot":false}']);
    expect(at.s.sent).toBe(2);
    expect(at.s.awaiting).toBe("log");
    await p;

    let reads = 0;
    const later = session(new Map(), async (after) => { reads++; return after === 0 ? [row(3)] : []; });
    const q = later.s.pump();
    expect(later.sent).toEqual([]);
    await q;
    expect(reads).toBe(1);
    expect(later.sent).toEqual(['{"t":"batch","changes":[{"seq":3}],"upTo":3,"snapshot":false}']);
  });
});
