// An edge's change recorder refuses, in the writer's transaction, a local change of a definition
// its platform sent (kept in synced_assets), and lets through what was made on the edge, users and
// devices, and everything on a platform.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ApiError } from "../../../src/core/errors.ts";
import { ChangeRecorder } from "../../../src/domain/changes.ts";
import { openDb, type Db } from "../../../src/store/db.ts";
import { migrate } from "../../../src/store/migrations.ts";
import { syncedAssetsRepo } from "../../../src/store/sync.ts";

let db: Db;
beforeAll(async () => {
  db = await openDb({ url: ":memory:", driver: "native" });
  await migrate(db);
  for (const [type, name] of [["service", "fromPlatform"], ["collection", "readings"], ["user", "ana@example.com"], ["device", "pump"]]) await syncedAssetsRepo.add(db, type!, name!);
});
afterAll(() => db.close());

const refusal = async (p: Promise<unknown>) => { try { await p; return null; } catch (e) { return e; } };

describe("an edge's change recorder", () => {
  const edge = new ChangeRecorder("edge", "edge:gw1");

  test("refuses a change of a definition the platform sent, saying why, and the transaction rolls back", async () => {
    const e = await refusal(edge.record(db, "sk", "service", "fromPlatform", "upsert", {}));
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).kind.code).toBe(1405);
    expect((e as ApiError).kind.status).toBe(403);
    expect((e as ApiError).detail).toBe("service 'fromPlatform' comes from the platform (this edge's template or a deployment): change it on the platform");
    expect(await refusal(edge.record(db, "sk", "collection", "readings", "delete", null))).toBeInstanceOf(ApiError);
    // the refusal happens inside the writer's transaction, which it undoes
    await db.run("CREATE TABLE scratch (x INTEGER)");
    const e2 = await refusal(db.tx(async (tx) => { await tx.run("INSERT INTO scratch VALUES (1)"); await edge.record(tx, "sk", "service", "fromPlatform", "upsert", {}); }));
    expect(e2).toBeInstanceOf(ApiError);
    expect((await db.get<{ n: number }>("SELECT count(*) AS n FROM scratch"))!.n).toBe(0);
  });

  test("lets through what was made on the edge, the same name of another kind, users and devices", async () => {
    expect(await refusal(edge.record(db, "sk", "service", "madeHere", "upsert", {}))).toBeNull();
    expect(await refusal(edge.record(db, "sk", "library", "fromPlatform", "upsert", {}))).toBeNull();
    expect(await refusal(edge.record(db, "sk", "user", "ana@example.com", "upsert", {}))).toBeNull();
    expect(await refusal(edge.record(db, "sk", "device", "pump", "delete", null))).toBeNull();
  });

  test("a definition the platform took back is the edge's again", async () => {
    await syncedAssetsRepo.remove(db, "collection", "readings");
    expect(await refusal(edge.record(db, "sk", "collection", "readings", "upsert", {}))).toBeNull();
  });

  test("a platform refuses nothing of the kind (it owns its assets)", async () => {
    const platform = new ChangeRecorder("platform", "platform");
    expect(await refusal(platform.record(db, "sk", "service", "fromPlatform", "upsert", {}))).toBeNull();
    expect(await refusal(platform.refuseIfPlatformOwned(db, "service", "fromPlatform"))).toBeNull();
  });
});
