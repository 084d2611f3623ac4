// Issuing, resolving, refreshing and revoking bearer tokens.
//
// Resolution is on the hot path of every request, so resolved principals are cached for a few
// seconds. A revocation drops the cache entry at once, through the tokens signals: on a cluster
// on every node (within TOKEN_CACHE_MS should a node miss the news).
import { ApiError } from "../core/errors.ts";
import { hashToken, newToken, nowSeconds } from "../core/ids.ts";
import type { Db, Executor } from "../store/db.ts";
import { type TokenKind, type TokenRow, tokensRepo } from "../store/tokens.ts";
import type { Principal } from "./principal.ts";
import { TtlCache } from "../core/cache.ts";
import { Signals } from "../core/signals.ts";

export const TOKEN_CACHE_MS = 5_000;
/** Refresh tokens outlive their access token by this factor (and at least a day). */
const REFRESH_FACTOR = 4;

export interface IssuedToken { token: string; refreshToken: string; expiresAt: number; hash: string }

/** Builds the principal for a token row, or null if its subject no longer exists. */
export type SubjectLoader = (row: TokenRow) => Promise<Principal | null>;

interface CacheEntry { principal: Principal; expiresAt: number }

export class Tokens {
  /** Keyed by the token itself: a hit costs no hashing. Swept: a device's token is read when it
   *  connects and seldom after, and 50,000 expired entries would be idle memory. */
  private readonly cache = new TtlCache<string, CacheEntry>(TOKEN_CACHE_MS, 50_000, true);
  private readonly loaders = new Map<TokenKind, SubjectLoader>();
  /** tokens valid only in this process, each for one request its platform relayed (see vouch) */
  private readonly vouched = new Map<string, Principal>();

  /** `signals`: where cached principals are said stale (on a cluster, on every node) */
  constructor(private readonly db: Db, private readonly signals = new Signals()) {
    signals.on("tokens.revoked", ({ hashes }) => {
      const gone = new Set(hashes);
      if (gone.size) this.cache.deleteWhere((e) => gone.has(e.principal.tokenHash));
    });
    signals.on("tokens.subjectChanged", ({ kind, id, systemKey }) => {
      this.cache.deleteWhere(({ principal: p }) => p.kind === kind && (p.id === id || (p.kind === "device" && p.name === id)) &&
        (systemKey === undefined || ("systemKey" in p && p.systemKey === systemKey)));
    });
    signals.on("tokens.systemChanged", ({ systemKey }) => {
      this.cache.deleteWhere(({ principal: p }) => "systemKey" in p && p.systemKey === systemKey);
    });
  }

  registerLoader(kind: TokenKind, loader: SubjectLoader) { this.loaders.set(kind, loader); }

  /** ttl in seconds; -1 (or 0) means the token never expires. */
  async issue(ex: Executor, kind: TokenKind, subjectId: string, systemKey: string | null, ttl: number): Promise<IssuedToken> {
    const token = newToken();
    const refreshToken = newToken();
    // rounded up: a token lives at least its whole ttl, never a fraction of a second less
    const now = Math.ceil(Date.now() / 1000);
    const expiresAt = ttl > 0 ? now + ttl : 0;
    const refreshExpiresAt = ttl > 0 ? now + Math.max(ttl * REFRESH_FACTOR, 86_400) : 0;
    const hash = hashToken(token);
    await tokensRepo.insert(ex, {
      token_hash: hash, kind, subject_id: subjectId, system_key: systemKey,
      expires_at: expiresAt, refresh_hash: hashToken(refreshToken), refresh_expires_at: refreshExpiresAt, created_at: now,
    });
    // expires_at on the wire: -1 means "never" for the clients that read it as a number
    return { token, refreshToken, expiresAt: expiresAt === 0 ? -1 : expiresAt, hash };
  }

  /** From the cache only, without waiting: the principal, or undefined when not cached. */
  resolveNow(token: string): Principal | undefined {
    const v = this.vouched.get(token);
    if (v) return v;
    const now = Date.now();
    const hit = this.cache.get(token, now);
    return hit && (hit.expiresAt === 0 || hit.expiresAt * 1000 > now) ? hit.principal : undefined;
  }

  /** The principal of a valid token, or null (unknown, expired, revoked, subject gone). */
  async resolve(token: string): Promise<Principal | null> {
    const v = this.vouched.get(token);
    if (v) return v;
    const hit = this.cache.get(token);
    if (hit) {
      if (hit.expiresAt !== 0 && hit.expiresAt * 1000 <= Date.now()) { this.cache.delete(token); return null; }
      return hit.principal;
    }
    const row = await tokensRepo.byHash(this.db, hashToken(token));
    if (!row || (row.expires_at !== 0 && row.expires_at <= nowSeconds())) return null;
    const loader = this.loaders.get(row.kind);
    const principal = loader ? await loader(row) : null;
    if (!principal) return null;
    this.cache.set(token, { principal, expiresAt: row.expires_at });
    return principal;
  }

  /** On an edge: a token for a caller its platform vouches for (a request relayed to the edge),
   *  loaded from this node's own records as a token of that subject would be (a user's roles as
   *  held here); null when this node does not hold the subject. The token lives in memory only,
   *  until `release`; a read-only caller may only read. */
  async vouch(kind: TokenKind, subjectId: string, systemKey: string | null, readOnly = false): Promise<{ token: string; principal: Principal; release(): void } | null> {
    const loader = this.loaders.get(kind === "devkey" ? "dev" : kind);
    const token = newToken();
    const row: TokenRow = { token_hash: hashToken(token), kind, subject_id: subjectId, system_key: systemKey, expires_at: 0, refresh_hash: null, refresh_expires_at: null, created_at: nowSeconds() };
    let principal = loader ? await loader(row) : null;
    if (!principal) return null;
    if (principal.kind === "developer") principal = { ...principal, admin: false, ...(readOnly && systemKey ? { key: { id: "relayed", systems: [systemKey], readOnly: true } } : {}) };
    this.vouched.set(token, principal);
    return { token, principal, release: () => { this.vouched.delete(token); } };
  }

  /** Drops cached principals of these tokens (revoked here, or on another node of a cluster). */
  forgetHashes(hashes: string[]) { this.signals.emit("tokens.revoked", { hashes }); }

  /** Exchanges a refresh token (with the access token it was issued with) for a new pair. */
  /** `accept` is asked before anything changes (say, "is this token of the system being called?"). */
  async refresh(kind: TokenKind | TokenKind[], refreshToken: unknown, accessToken: unknown, ttl: (row: TokenRow) => Promise<number>, accept: (row: TokenRow) => boolean = () => true): Promise<{ row: TokenRow; issued: IssuedToken }> {
    if (typeof refreshToken !== "string" || !refreshToken) throw new ApiError("INVALID_ARGUMENT", "refresh_token is required");
    if (typeof accessToken !== "string" || !accessToken) throw new ApiError("INVALID_ARGUMENT", "access_token is required");
    const kinds = Array.isArray(kind) ? kind : [kind];
    return this.db.tx(async (tx) => {
      const row = await tokensRepo.byRefreshHash(tx, hashToken(refreshToken));
      const now = nowSeconds();
      if (!row || !kinds.includes(row.kind) || row.token_hash !== hashToken(accessToken) || !accept(row) ||
          (row.refresh_expires_at && row.refresh_expires_at > 0 && row.refresh_expires_at <= now))
        throw new ApiError("BAD_CREDENTIALS", "invalid refresh token");
      await tokensRepo.delete(tx, row.token_hash);
      this.forgetHashes([row.token_hash]);
      const issued = await this.issue(tx, row.kind, row.subject_id, row.system_key, await ttl(row));
      return { row, issued };
    });
  }

  async revoke(ex: Executor, tokenHash: string) {
    await tokensRepo.delete(ex, tokenHash);
    this.forgetHashes([tokenHash]);
  }

  /** Revokes every token of a subject but those in `except` (the caller's own session, a
   *  service account's token). */
  async revokeSubject(ex: Executor, kind: TokenKind, subjectId: string, except: string[] = [], systemKey?: string) {
    const gone = new Set(await tokensRepo.deleteForSubject(ex, kind, subjectId, except, systemKey));
    this.forgetHashes([...gone]);
  }

  async revokeSystem(ex: Executor, systemKey: string) {
    await tokensRepo.deleteForSystem(ex, systemKey);
    this.forgetSystem(systemKey);
  }

  /** Makes the next request of this subject reload its principal (roles or email changed). */
  forgetSubject(kind: Principal["kind"], id: string, systemKey?: string) { this.signals.emit("tokens.subjectChanged", { kind, id, ...(systemKey === undefined ? {} : { systemKey }) }); }
  forgetSystem(systemKey: string) { this.signals.emit("tokens.systemChanged", { systemKey }); }

  purgeExpired() { return tokensRepo.purgeExpired(this.db, nowSeconds()); }
}
