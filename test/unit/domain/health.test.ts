// /health's report (src/domain/health.ts): while a new check's write waits (behind the
// transactions queued before it), the last finished report answers at once; a write that hangs
// still makes the node unhealthy once its check gives up.
import { describe, expect, test } from "bun:test";
import { Health } from "../../../src/domain/health.ts";
import type { Db } from "../../../src/store/db.ts";

describe("health report", () => {
  test("the last finished report answers while a check's write waits; a hung write shows when its check ends", async () => {
    let hang = false;
    const db = { run: () => (hang ? new Promise(() => {}) : Promise.resolve({ changes: 1 })) } as unknown as Db;
    const h = new Health({ db, dbFile: null, minFreeMb: 0 });
    expect(await h.report(1_000)).toEqual({ status: "ok" });
    hang = true;
    // a new check (the last is over a second old) whose write does not come back: not waited for
    const answer = await Promise.race([h.report(3_000), Bun.sleep(200).then(() => "waited")]);
    expect(answer).toEqual({ status: "ok" });
    // its check gives up after DB_TIMEOUT_MS: from then on the node says why it is unhealthy
    await Bun.sleep(2_100);
    const after = await Promise.race([h.report(3_500), Bun.sleep(200).then(() => "waited")]);
    expect(after).toMatchObject({ status: "unhealthy", reasons: [expect.stringContaining("the database cannot write")] });
  });

  test("the first report waits for its check", async () => {
    let done = false;
    const db = { run: async () => { await Bun.sleep(50); done = true; return { changes: 1 }; } } as unknown as Db;
    expect(await new Health({ db, dbFile: null, minFreeMb: 0 }).report()).toEqual({ status: "ok" });
    expect(done).toBe(true);
  });
});
