// Issuing, resolving, refreshing and revoking bearer tokens.
//
// Resolution is on the hot path of every request, so resolved principals are cached for a few
// seconds. Revocation on this node drops the cache entry at once; another node of a multi-node
// platform sees a revocation within TOKEN_CACHE_MS.
import { ApiError } from "../core/errors.ts";
import { hashToken, newToken, nowSeconds } from "../core/ids.ts";
import type { Db, Executor } from "../store/db.ts";
import { type TokenKind, type TokenRow, tokensRepo } from "../store/tokens.ts";
import type { Principal } from "./principal.ts";

export const TOKEN_CACHE_MS = 5_000;
const CACHE_MAX = 50_000;
/** Refresh tokens outlive their access token by this factor (and at least a day). */
const REFRESH_FACTOR = 4;

export interface IssuedToken { token: string; refreshToken: string; expiresAt: number; hash: string }

/** Builds the principal for a token row, or null if its subject no longer exists. */
export type SubjectLoader = (row: TokenRow) => Promise<Principal | null>;

interface CacheEntry { principal: Principal; expiresAt: number; until: number }

export class Tokens {
  private readonly cache = new Map<string, CacheEntry>();
  private readonly loaders = new Map<TokenKind, SubjectLoader>();

  constructor(private readonly db: Db) {}

  registerLoader(kind: TokenKind, loader: SubjectLoader) { this.loaders.set(kind, loader); }

  /** ttl in seconds; -1 (or 0) means the token never expires. */
  async issue(ex: Executor, kind: TokenKind, subjectId: string, systemKey: string | null, ttl: number): Promise<IssuedToken> {
    const token = newToken();
    const refreshToken = newToken();
    const now = nowSeconds();
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

  /** The principal of a valid token, or null (unknown, expired, revoked, subject gone). */
  async resolve(token: string): Promise<Principal | null> {
    const hash = hashToken(token);
    const now = Date.now();
    const hit = this.cache.get(hash);
    if (hit && hit.until > now) {
      if (hit.expiresAt !== 0 && hit.expiresAt * 1000 <= now) { this.cache.delete(hash); return null; }
      return hit.principal;
    }
    const row = await tokensRepo.byHash(this.db, hash);
    if (!row || (row.expires_at !== 0 && row.expires_at <= nowSeconds())) { this.cache.delete(hash); return null; }
    const loader = this.loaders.get(row.kind);
    const principal = loader ? await loader(row) : null;
    if (!principal) return null;
    if (this.cache.size >= CACHE_MAX) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(hash, { principal, expiresAt: row.expires_at, until: now + TOKEN_CACHE_MS });
    return principal;
  }

  /** Exchanges a refresh token (with the access token it was issued with) for a new pair. */
  async refresh(kind: TokenKind | TokenKind[], refreshToken: unknown, accessToken: unknown, ttl: (row: TokenRow) => Promise<number>): Promise<{ row: TokenRow; issued: IssuedToken }> {
    if (typeof refreshToken !== "string" || !refreshToken) throw new ApiError("INVALID_ARGUMENT", "refresh_token is required");
    if (typeof accessToken !== "string" || !accessToken) throw new ApiError("INVALID_ARGUMENT", "access_token is required");
    const kinds = Array.isArray(kind) ? kind : [kind];
    return this.db.tx(async (tx) => {
      const row = await tokensRepo.byRefreshHash(tx, hashToken(refreshToken));
      const now = nowSeconds();
      if (!row || !kinds.includes(row.kind) || row.token_hash !== hashToken(accessToken) ||
          (row.refresh_expires_at && row.refresh_expires_at > 0 && row.refresh_expires_at <= now))
        throw new ApiError("BAD_CREDENTIALS", "invalid refresh token");
      await tokensRepo.delete(tx, row.token_hash);
      this.cache.delete(row.token_hash);
      const issued = await this.issue(tx, row.kind, row.subject_id, row.system_key, await ttl(row));
      return { row, issued };
    });
  }

  async revoke(ex: Executor, tokenHash: string) {
    await tokensRepo.delete(ex, tokenHash);
    this.cache.delete(tokenHash);
  }

  /** Revokes every token of a subject (optionally keeping one, e.g. the caller's own session). */
  async revokeSubject(ex: Executor, kind: TokenKind, subjectId: string, exceptHash?: string) {
    for (const h of await tokensRepo.deleteForSubject(ex, kind, subjectId, exceptHash)) this.cache.delete(h);
  }

  async revokeSystem(ex: Executor, systemKey: string) {
    for (const h of await tokensRepo.deleteForSystem(ex, systemKey)) this.cache.delete(h);
  }

  /** Makes the next request of this subject reload its principal (roles or email changed). */
  forgetSubject(kind: Principal["kind"], id: string) {
    for (const [h, e] of this.cache) {
      const p = e.principal;
      if (p.kind === kind && (p.id === id || (p.kind === "device" && p.name === id))) this.cache.delete(h);
    }
  }
  forgetSystem(systemKey: string) {
    for (const [h, e] of this.cache) if ("systemKey" in e.principal && e.principal.systemKey === systemKey) this.cache.delete(h);
  }

  purgeExpired() { return tokensRepo.purgeExpired(this.db, nowSeconds()); }
}
