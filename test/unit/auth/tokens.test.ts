// src/auth/tokens.ts with a real in-memory libSQL database.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { ApiError } from "../../../src/core/errors.ts";
import { hashToken, newToken, nowSeconds } from "../../../src/core/ids.ts";
import { Tokens } from "../../../src/auth/tokens.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import { openDb, type Db } from "../../../src/store/db.ts";
import { migrate } from "../../../src/store/migrations.ts";
import { type TokenRow, tokensRepo } from "../../../src/store/tokens.ts";

const SK = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaa1";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Waits until the wall clock is `ms` into a second, so second-granularity expiry is predictable. */
async function atMsOfSecond(ms: number) {
  const now = Date.now() % 1000;
  await sleep((ms - now + 1000) % 1000);
}

let db: Db;
let tokens: Tokens;
/** The "user directory" the loader reads: tests change it to simulate edits and deletions. */
let users: Map<string, { email: string; roles: string[] }>;
let loads: number;

beforeEach(async () => {
  db = await openDb({ url: ":memory:" });
  await migrate(db);
  tokens = new Tokens(db);
  users = new Map([["u1", { email: "one@x.io", roles: ["Authenticated"] }], ["u2", { email: "two@x.io", roles: [] }]]);
  loads = 0;
  tokens.registerLoader("user", async (row: TokenRow): Promise<Principal | null> => {
    loads++;
    const u = users.get(row.subject_id);
    return u ? { kind: "user", systemKey: row.system_key!, id: row.subject_id, email: u.email, roles: u.roles, tokenHash: row.token_hash } : null;
  });
});
afterEach(async () => { await db.close(); });

const rowCount = async () => (await db.get<{ n: number }>(`SELECT count(*) AS n FROM tokens`))!.n;

describe("issue", () => {
  test("returns a random 256-bit token and refresh token, stores only their hashes", async () => {
    const before = nowSeconds();
    const t = await tokens.issue(db, "user", "u1", SK, 3600);
    expect(t.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(t.refreshToken).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(t.token).not.toBe(t.refreshToken);
    expect(t.hash).toBe(hashToken(t.token));
    expect(t.expiresAt).toBeGreaterThanOrEqual(before + 3600);
    expect(t.expiresAt).toBeLessThanOrEqual(nowSeconds() + 3600 + 1); // issue time rounds up

    const row = (await tokensRepo.byHash(db, t.hash))!;
    expect(row).toMatchObject({ kind: "user", subject_id: "u1", system_key: SK, expires_at: t.expiresAt, refresh_hash: hashToken(t.refreshToken) });
    expect(row.refresh_expires_at!).toBeGreaterThan(row.expires_at);
    // the plaintext tokens are nowhere in the table
    const dump = JSON.stringify(await db.all(`SELECT * FROM tokens`));
    expect(dump).not.toContain(t.token);
    expect(dump).not.toContain(t.refreshToken);

    const other = await tokens.issue(db, "user", "u1", SK, 3600);
    expect(other.token).not.toBe(t.token);
    expect(await rowCount()).toBe(2);
  });

  test("ttl -1 (and 0) never expire: expiresAt -1 on the wire, 0 in the table", async () => {
    for (const ttl of [-1, 0]) {
      const t = await tokens.issue(db, "user", "u1", SK, ttl);
      expect(t.expiresAt).toBe(-1);
      const row = (await tokensRepo.byHash(db, t.hash))!;
      expect(row.expires_at).toBe(0);
      expect(await tokens.resolve(t.token)).toMatchObject({ kind: "user", id: "u1" });
    }
  });

  test("issue inside a rolled-back transaction leaves no token", async () => {
    let issued!: { token: string };
    await expect(db.tx(async (tx) => {
      issued = await tokens.issue(tx, "user", "u1", SK, 60);
      throw new Error("rollback");
    })).rejects.toThrow("rollback");
    expect(await tokens.resolve(issued.token)).toBeNull();
    expect(await rowCount()).toBe(0);
  });
});

describe("resolve", () => {
  test("gives the loader's principal for a valid token", async () => {
    const t = await tokens.issue(db, "user", "u1", SK, 3600);
    expect(await tokens.resolve(t.token)).toEqual({ kind: "user", systemKey: SK, id: "u1", email: "one@x.io", roles: ["Authenticated"], tokenHash: t.hash });
  });

  test("unknown, empty and hash-instead-of-token values resolve to null", async () => {
    const t = await tokens.issue(db, "user", "u1", SK, 3600);
    expect(await tokens.resolve(newToken())).toBeNull();
    expect(await tokens.resolve("")).toBeNull();
    expect(await tokens.resolve(t.hash)).toBeNull(); // a leaked hash is not a token
    expect(await tokens.resolve(t.refreshToken)).toBeNull(); // nor is the refresh token
  });

  test("a kind without a registered loader, or a subject that is gone, resolves to null", async () => {
    const dev = await tokens.issue(db, "dev", "d1", null, 3600);
    expect(await tokens.resolve(dev.token)).toBeNull();
    const t = await tokens.issue(db, "user", "ghost", SK, 3600);
    expect(await tokens.resolve(t.token)).toBeNull();
  });

  test("resolved principals are cached (the loader is not called again)", async () => {
    const t = await tokens.issue(db, "user", "u1", SK, 3600);
    await tokens.resolve(t.token);
    await tokens.resolve(t.token);
    await tokens.resolve(t.token);
    expect(loads).toBe(1);
  });

  test("a token expires after its ttl, cached or not", async () => {
    await atMsOfSecond(50);
    const cached = await tokens.issue(db, "user", "u1", SK, 1);
    const uncached = await tokens.issue(db, "user", "u2", SK, 1);
    expect(await tokens.resolve(cached.token)).not.toBeNull(); // now in the cache
    await sleep(2100);
    expect(await tokens.resolve(cached.token)).toBeNull();
    expect(await tokens.resolve(uncached.token)).toBeNull();
    const never = await tokens.issue(db, "user", "u1", SK, -1);
    expect(await tokens.resolve(never.token)).not.toBeNull();
  });

  test("a token is valid for its whole ttl, even when issued late in a second", async () => {
    await atMsOfSecond(900);
    const t = await tokens.issue(db, "user", "u1", SK, 2);
    await sleep(1300); // 1.3 s into a 2 s lifetime
    expect(await tokens.resolve(t.token)).not.toBeNull();
  });
});

describe("refresh", () => {
  const ttl = async () => 600;

  test("exchanges refresh + matching access token for a new pair; the old access token stops working", async () => {
    const t = await tokens.issue(db, "user", "u1", SK, 60);
    expect(await tokens.resolve(t.token)).not.toBeNull(); // cached
    const before = nowSeconds();
    const { row, issued } = await tokens.refresh("user", t.refreshToken, t.token, ttl);
    expect(row).toMatchObject({ kind: "user", subject_id: "u1", system_key: SK, token_hash: t.hash });
    expect(issued.token).not.toBe(t.token);
    expect(issued.refreshToken).not.toBe(t.refreshToken);
    expect(issued.expiresAt).toBeGreaterThanOrEqual(before + 600);
    expect(issued.expiresAt).toBeLessThanOrEqual(nowSeconds() + 600 + 1); // issue time rounds up
    expect(await tokens.resolve(t.token)).toBeNull();
    expect(await tokens.resolve(issued.token)).toMatchObject({ kind: "user", id: "u1", systemKey: SK });
    expect(await rowCount()).toBe(1);
  });

  test("works only once", async () => {
    const t = await tokens.issue(db, "user", "u1", SK, 60);
    const first = await tokens.refresh("user", t.refreshToken, t.token, ttl);
    await expect(tokens.refresh("user", t.refreshToken, t.token, ttl)).rejects.toMatchObject({ code: 203, status: 401 });
    // the new pair refreshes in turn
    const second = await tokens.refresh("user", first.issued.refreshToken, first.issued.token, ttl);
    expect(await tokens.resolve(second.issued.token)).not.toBeNull();
    expect(await tokens.resolve(first.issued.token)).toBeNull();
  });

  test("two concurrent refreshes with the same pair: exactly one wins", async () => {
    const t = await tokens.issue(db, "user", "u1", SK, 60);
    const r = await Promise.allSettled([
      tokens.refresh("user", t.refreshToken, t.token, ttl),
      tokens.refresh("user", t.refreshToken, t.token, ttl),
    ]);
    expect(r.filter((x) => x.status === "fulfilled").length).toBe(1);
    const rejected = r.find((x) => x.status === "rejected") as PromiseRejectedResult;
    expect(rejected.reason).toBeInstanceOf(ApiError);
    expect(await rowCount()).toBe(1);
  });

  test("requires the access token the refresh token was issued with", async () => {
    const a = await tokens.issue(db, "user", "u1", SK, 60);
    const b = await tokens.issue(db, "user", "u1", SK, 60);
    for (const access of [b.token, newToken(), a.hash, a.refreshToken]) {
      const e = await tokens.refresh("user", a.refreshToken, access, ttl).then(() => null, (x) => x);
      expect(e).toBeInstanceOf(ApiError);
      expect((e as ApiError).code).toBe(203);
    }
    // the failed attempts did not consume the refresh token
    expect(await tokens.resolve(a.token)).not.toBeNull();
    await tokens.refresh("user", a.refreshToken, a.token, ttl);
  });

  test("missing tokens are a 400; wrong kind or unknown refresh token a 401", async () => {
    const t = await tokens.issue(db, "user", "u1", SK, 60);
    for (const [r, a] of [[undefined, t.token], ["", t.token], [t.refreshToken, undefined], [t.refreshToken, ""], [5, t.token]] as [unknown, unknown][]) {
      const e = await tokens.refresh("user", r, a, ttl).then(() => null, (x) => x);
      expect(e).toBeInstanceOf(ApiError);
      expect((e as ApiError).status).toBe(400);
    }
    await expect(tokens.refresh("device", t.refreshToken, t.token, ttl)).rejects.toMatchObject({ code: 203 });
    await expect(tokens.refresh(["dev", "device"], t.refreshToken, t.token, ttl)).rejects.toMatchObject({ code: 203 });
    await expect(tokens.refresh("user", newToken(), t.token, ttl)).rejects.toMatchObject({ code: 203 });
    // a list of kinds including the right one is fine
    await tokens.refresh(["anon", "user"], t.refreshToken, t.token, ttl);
  });

  test("works after the access token expired, while the refresh token is valid", async () => {
    await atMsOfSecond(50);
    const t = await tokens.issue(db, "user", "u1", SK, 1);
    await sleep(2100); // a ttl of 1 s lasts until the end of the next whole second
    expect(await tokens.resolve(t.token)).toBeNull();
    const { issued } = await tokens.refresh("user", t.refreshToken, t.token, ttl);
    expect(await tokens.resolve(issued.token)).not.toBeNull();
  });

  test("refuses an expired refresh token", async () => {
    const token = newToken(), refresh = newToken(), now = nowSeconds();
    await tokensRepo.insert(db, {
      token_hash: hashToken(token), kind: "user", subject_id: "u1", system_key: SK, expires_at: now - 100,
      refresh_hash: hashToken(refresh), refresh_expires_at: now - 10, created_at: now - 1000,
    });
    await expect(tokens.refresh("user", refresh, token, ttl)).rejects.toMatchObject({ code: 203 });
  });

  test("a never-expiring token's refresh token never expires either", async () => {
    const t = await tokens.issue(db, "user", "u1", SK, -1);
    expect((await tokensRepo.byHash(db, t.hash))!.refresh_expires_at).toBe(0);
    const { issued } = await tokens.refresh("user", t.refreshToken, t.token, async () => -1);
    expect(issued.expiresAt).toBe(-1);
  });
});

describe("revocation and cache control", () => {
  test("revoke removes the token even when its principal is cached", async () => {
    const t = await tokens.issue(db, "user", "u1", SK, 3600);
    const keep = await tokens.issue(db, "user", "u1", SK, 3600);
    expect(await tokens.resolve(t.token)).not.toBeNull();
    await tokens.revoke(db, t.hash);
    expect(await tokens.resolve(t.token)).toBeNull();
    expect(await tokens.resolve(keep.token)).not.toBeNull();
    expect(await tokensRepo.byHash(db, t.hash)).toBeUndefined();
  });

  test("revokeSubject removes every token of that subject (but the excepted one) and nobody else's", async () => {
    const a1 = await tokens.issue(db, "user", "u1", SK, 3600);
    const a2 = await tokens.issue(db, "user", "u1", SK, 3600);
    const a3 = await tokens.issue(db, "user", "u1", SK, 3600);
    const b = await tokens.issue(db, "user", "u2", SK, 3600);
    for (const t of [a1, a2, a3, b]) expect(await tokens.resolve(t.token)).not.toBeNull(); // all cached
    await tokens.revokeSubject(db, "user", "u1", [a3.hash]);
    expect(await tokens.resolve(a1.token)).toBeNull();
    expect(await tokens.resolve(a2.token)).toBeNull();
    expect(await tokens.resolve(a3.token)).not.toBeNull();
    expect(await tokens.resolve(b.token)).not.toBeNull();
    await tokens.revokeSubject(db, "user", "u1");
    expect(await tokens.resolve(a3.token)).toBeNull();
    expect(await rowCount()).toBe(1);
  });

  test("revokeSubject only touches the given kind", async () => {
    tokens.registerLoader("device", async (row) => ({ kind: "device", systemKey: row.system_key!, id: row.subject_id, name: row.subject_id, roles: [], tokenHash: row.token_hash }));
    const u = await tokens.issue(db, "user", "same", SK, 3600);
    users.set("same", { email: "s@x.io", roles: [] });
    const d = await tokens.issue(db, "device", "same", SK, 3600);
    await tokens.revokeSubject(db, "device", "same");
    expect(await tokens.resolve(d.token)).toBeNull();
    expect(await tokens.resolve(u.token)).not.toBeNull();
  });

  test("revocation inside a rolled-back transaction does not lose the token", async () => {
    const t = await tokens.issue(db, "user", "u1", SK, 3600);
    await expect(db.tx(async (tx) => {
      await tokens.revoke(tx, t.hash);
      throw new Error("rollback");
    })).rejects.toThrow("rollback");
    expect(await tokensRepo.byHash(db, t.hash)).toBeDefined();
    expect(await tokens.resolve(t.token)).not.toBeNull();
  });

  test("forgetSubject makes the next resolve reload the principal", async () => {
    const t = await tokens.issue(db, "user", "u1", SK, 3600);
    const other = await tokens.issue(db, "user", "u2", SK, 3600);
    expect((await tokens.resolve(t.token))!).toMatchObject({ email: "one@x.io" });
    await tokens.resolve(other.token);
    users.set("u1", { email: "renamed@x.io", roles: ["Administrator"] });
    users.set("u2", { email: "two-renamed@x.io", roles: [] });
    expect((await tokens.resolve(t.token))!).toMatchObject({ email: "one@x.io" }); // still cached
    tokens.forgetSubject("user", "u1");
    expect((await tokens.resolve(t.token))!).toMatchObject({ email: "renamed@x.io", roles: ["Administrator"] });
    expect((await tokens.resolve(other.token))!).toMatchObject({ email: "two@x.io" }); // not forgotten
    // a subject that was deleted stops resolving once forgotten
    users.delete("u1");
    tokens.forgetSubject("user", "u1");
    expect(await tokens.resolve(t.token)).toBeNull();
  });

  test("forgetSubject matches devices by name", async () => {
    const names = new Map([["dev-1", ["r1"]]]);
    tokens.registerLoader("device", async (row) => ({ kind: "device", systemKey: row.system_key!, id: `id-${row.subject_id}`, name: row.subject_id, roles: names.get(row.subject_id) ?? [], tokenHash: row.token_hash }));
    const d = await tokens.issue(db, "device", "dev-1", SK, 3600);
    expect(await tokens.resolve(d.token)).toMatchObject({ roles: ["r1"] });
    names.set("dev-1", ["r2"]);
    tokens.forgetSubject("device", "dev-1");
    expect(await tokens.resolve(d.token)).toMatchObject({ roles: ["r2"] });
  });

  test("purgeExpired removes tokens whose access and refresh lifetimes are both over, and only those", async () => {
    const now = nowSeconds();
    const row = (h: string, expires_at: number, refresh_expires_at: number | null): TokenRow => ({
      token_hash: h, kind: "user", subject_id: "u1", system_key: SK, expires_at, refresh_hash: `r-${h}`, refresh_expires_at, created_at: now - 5000,
    });
    await tokensRepo.insert(db, row("dead", now - 100, now - 50));
    await tokensRepo.insert(db, row("dead-no-refresh", now - 100, null));
    await tokensRepo.insert(db, row("refreshable", now - 100, now + 1000));
    await tokensRepo.insert(db, row("live", now + 100, now + 1000));
    await tokensRepo.insert(db, row("never", 0, 0));
    await tokensRepo.insert(db, row("never-expiring-refresh", now - 100, 0));
    const live = await tokens.issue(db, "user", "u1", SK, 3600);
    const r = await tokens.purgeExpired();
    expect(r.changes).toBe(2);
    const left = (await db.all<{ token_hash: string }>(`SELECT token_hash FROM tokens ORDER BY token_hash`)).map((x) => x.token_hash);
    expect(left).toEqual(["live", "never", "never-expiring-refresh", "refreshable", live.hash].sort());
    expect(await tokens.resolve(live.token)).not.toBeNull();
    expect((await tokens.purgeExpired()).changes).toBe(0);
  });
});
