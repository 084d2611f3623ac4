// Locks of one process (LocalLocks) against the backend contract, and a run's LockSession: what
// its callers hold, the errors for misuse, everything given up when the run ends (a grant that
// comes after the end included), names checked.
import { describe, expect, test } from "bun:test";
import { type LockBackend, type LockGrant, type LockRequest, LocalLocks, Locks, LOCK_NAME_MAX } from "../../../src/domain/locks.ts";
import { lockContract, until } from "./lock-contract.ts";

describe("LocalLocks", () => {
  lockContract(() => new LocalLocks(), 5);

  test("a lock nobody holds or waits for is forgotten", async () => {
    const b = new LocalLocks();
    const ac = new AbortController();
    const g = await b.acquire({ key: "s:a", mode: "exclusive", waitMs: 1000, signal: ac.signal, what: "a" });
    expect(b.size).toBe(1);
    await g.release();
    expect(b.size).toBe(0);
  });
});

const code = (e: unknown) => (e as { kind?: { code: number } })?.kind?.code;
const settled = async (p: Promise<unknown>) => p.then(() => "ok", (e) => e);

describe("LockSession", () => {
  test("a run's locks are released when it ends, its waits given up", async () => {
    const locks = new Locks(new LocalLocks());
    const run = locks.session("sys");
    await run.lock("a", "svc", "exclusive");
    await run.lock("b", "svc", "shared");
    const other = locks.session("sys");
    let got = false;
    const waiting = other.lock("a", "x", "exclusive").then(() => { got = true; });
    const third = locks.session("sys");
    const blocked = third.lock("a", "y", "exclusive");
    const blockedOutcome = settled(blocked);
    await Bun.sleep(10);
    expect(got).toBe(false);
    await third.close(); // ends while waiting
    expect(String(((await blockedOutcome) as Error).message)).toContain("the run ended");
    await run.close();
    await waiting;
    expect(got).toBe(true);
    // b was released too: an exclusive request gets it at once
    await other.lock("b", "x", "exclusive");
    await other.close();
    // nothing left behind
    const b = (locks.backend as LocalLocks);
    expect(b.size).toBe(0);
  });

  test("callers of one run are holders apart; misuse is an error, not a deadlock", async () => {
    const locks = new Locks(new LocalLocks());
    const run = locks.session("sys");
    await run.lock("L", "one", "exclusive");
    expect(code(await settled(run.lock("L", "one", "exclusive")))).toBe(111); // already held
    expect(code(await settled(run.lock("L", "one", "shared")))).toBe(111); // holds it exclusively
    expect(code(await settled(run.unlock("L", "one", "shared")))).toBe(111); // not held shared
    expect(code(await settled(run.unlock("L", "two", "exclusive")))).toBe(111); // another caller's
    expect(code(await settled(run.unlock("M", "one", "exclusive")))).toBe(111); // never taken
    let two = false;
    const p = run.lock("L", "two", "exclusive").then(() => { two = true; });
    expect(code(await settled(run.lock("L", "two", "exclusive")))).toBe(111); // already waiting
    await Bun.sleep(10);
    expect(two).toBe(false);
    await run.unlock("L", "one", "exclusive");
    await p;
    expect(two).toBe(true);
    await run.unlock("L", "two", "exclusive");
    // shared, then exclusive once released
    await run.lock("L", "one", "shared");
    await run.unlock("L", "one", "shared");
    await run.lock("L", "one", "exclusive");
    await run.close();
    expect(code(await settled(run.lock("L", "one", "exclusive")))).toBe(111); // the run has ended
  });

  test("systems are apart: the same name in two systems is two locks", async () => {
    const locks = new Locks(new LocalLocks());
    const a = locks.session("sysA"), b = locks.session("sysB");
    await a.lock("L", "c", "exclusive");
    await b.lock("L", "c", "exclusive"); // granted at once
    await a.close();
    await b.close();
  });

  test("names and callers are checked", async () => {
    const run = new Locks(new LocalLocks()).session("sys");
    for (const bad of [undefined, null, "", 5, {}, ["a"], "x".repeat(LOCK_NAME_MAX + 1)])
      expect(code(await settled(run.lock(bad, "c", "exclusive")))).toBe(111);
    for (const bad of [5, {}, true, "x".repeat(LOCK_NAME_MAX + 1)])
      expect(code(await settled(run.lock("n", bad, "exclusive")))).toBe(111);
    await run.lock("x".repeat(LOCK_NAME_MAX), undefined, "exclusive"); // the longest name; no caller is ""
    await run.unlock("x".repeat(LOCK_NAME_MAX), "", "exclusive");
    await run.close();
  });

  test("a lock granted as the run ends is released, not kept", async () => {
    // a backend whose grants come late, after the session closed
    const releases: string[] = [];
    let grantNow: (() => void) | null = null;
    const slow: LockBackend = {
      acquire: (r: LockRequest) => new Promise<LockGrant>((res) => { grantNow = () => res({ release: async () => { releases.push(r.key); } }); }),
    };
    const run = new Locks(slow).session("sys");
    const p = settled(run.lock("late", "c", "exclusive"));
    expect(await until(() => grantNow !== null)).toBe(true);
    const closing = run.close();
    grantNow!();
    await closing;
    expect(code(await p)).toBe(111);
    expect(releases).toEqual(["sys:late"]);
  });

  test("the wait is bounded by the Locks' waitMs", async () => {
    const locks = new Locks(new LocalLocks(), 200);
    const a = locks.session("s"), b = locks.session("s");
    await a.lock("L", "", "exclusive");
    const t0 = Date.now();
    const e = await settled(b.lock("L", "", "exclusive"));
    expect(code(e)).toBe(406);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
    await a.close();
    await b.close();
  });
});
