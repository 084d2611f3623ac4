// Device keys at rest, and checking them at the rate devices reconnect. argon2id (passwords.ts)
// checks about 20 keys a second per core: 10,000 devices signing in again after a restart took
// minutes. So:
//  - a key the server generated (256 random bits) is stored as its SHA-256, as tokens are: a hash
//    of a key nobody can guess leaves nothing to guess, and it checks in microseconds;
//  - a key a client chose keeps its argon2id hash, and next to it a verifier: an HMAC-SHA256 of the
//    key under a key derived from the server's secret key (--secret-key, or the data directory's
//    secret.key; never in the database). A sign-in checks the verifier; argon2id only runs for a
//    hash without one of ours (made before verifiers existed, or on another node with another
//    secret, such as the platform for an edge), and the verifier it then earns is kept.
// argon2id for a chosen key also leaves the request that sets it (2,000 keys would hold a bulk
// creation for a minute and a half): the device first holds a stand-in hash (random, "pending$")
// with the verifier bound to it, and the key sealed with the secret box waits in a persisted job
// until domain/deviceKeyHashes.ts computes the argon2id hash and puts it in the stand-in's place.
// Sign-in checks the verifier before and after; a stand-in is never checked with argon2id.
// A stolen database alone gives nothing more to guess against than before: without the secret key
// a verifier cannot be tested, nor a sealed key opened. Each verifier carries a tag binding it to its hash and to this
// secret, so a verifier of a replaced key or of another node's secret is recognised and ignored,
// never taken as a refusal.
import { createHmac, timingSafeEqual } from "node:crypto";
import { hashToken, newToken } from "../core/ids.ts";
import { hashPassword, verifyPassword } from "./passwords.ts";
import type { SecretBox } from "./secrets.ts";

const GENERATED = "sha256$";
const STAND_IN = "pending$";

const same = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

/** A key's stored form: its hash, its verifiers, and (a chosen key whose argon2id hash is still to
 *  come) the key sealed for the job that computes it. */
export interface StoredKey { hash: string; verifiers: string[]; sealed?: string }

export class DeviceKeys {
  private readonly secret: Buffer | null;

  /** Without a secret box (tests, tools) chosen keys are hashed with argon2id at once and checked with it alone. */
  constructor(private readonly box: SecretBox | null) {
    this.secret = box ? box.derive("outpost device key verifier v1") : null;
  }

  /** The stored form of a key the server generated. */
  static generated(key: string): string {
    return GENERATED + hashToken(key);
  }

  /** Whether a stored hash is the stand-in of a chosen key whose argon2id hash is still to come. */
  static isStandIn(hash: string | null): boolean {
    return !!hash && hash.startsWith(STAND_IN);
  }

  /** The stored form of a key a client chose: at once a stand-in hash, its verifier and the sealed
   *  key (settle() makes the argon2id hash later); without a secret box, the argon2id hash now. */
  async chosen(key: string): Promise<StoredKey> {
    if (!this.box) return { hash: await hashPassword(key), verifiers: [] };
    const hash = STAND_IN + newToken();
    return { hash, verifiers: [this.verifier(key, hash)!], sealed: this.box.seal(key) };
  }

  /** The argon2id hash of a sealed key and its verifier: what replaces a stand-in. Throws when the
   *  key was sealed under another secret. */
  async settle(sealed: string): Promise<{ hash: string; verifier: string }> {
    const key = this.box!.open(sealed);
    const hash = await hashPassword(key);
    return { hash, verifier: this.verifier(key, hash)! };
  }

  private mac(...parts: string[]): string {
    const h = createHmac("sha256", this.secret!);
    for (const p of parts) h.update(p).update("\0");
    return h.digest("base64url");
  }

  /** Names a hash under this secret without telling anything about the key. */
  private tag(hash: string): string {
    return this.mac("tag", hash).slice(0, 16);
  }

  private verifier(key: string, hash: string): string | null {
    return this.secret ? `${this.tag(hash)}.${this.mac("key", hash, key)}` : null;
  }

  /** Whether `key` is one of a device's keys (its stored hashes and verifiers). `learned`: the
   *  verifiers to store when argon2id had to confirm a chosen key (the next check is fast). */
  async check(key: string, hashes: string[], verifiers: string[]): Promise<{ ok: boolean; learned?: string[] }> {
    const slow: string[] = [];
    let generated: string | undefined;
    for (const h of hashes) {
      if (h.startsWith(GENERATED)) { if (same((generated ??= DeviceKeys.generated(key)), h)) return { ok: true }; continue; }
      if (!this.secret) { if (!h.startsWith(STAND_IN)) slow.push(h); continue; }
      const tag = this.tag(h) + ".";
      const mine = verifiers.find((v) => v.startsWith(tag));
      // a stand-in without our verifier (another node's secret) waits for its argon2id hash
      if (mine === undefined) { if (!h.startsWith(STAND_IN)) slow.push(h); }
      else if (same(mine, this.verifier(key, h)!)) return { ok: true };
    }
    for (const h of slow) {
      if (!(await verifyPassword(key, h))) continue;
      const v = this.verifier(key, h);
      return { ok: true, learned: v ? [...this.keep(hashes, verifiers), v] : undefined };
    }
    return { ok: false };
  }

  /** The work of a check that finds no device, so its answer takes about as long. */
  refuse(key: string): false {
    DeviceKeys.generated(key);
    if (this.secret) this.verifier(key, "");
    return false;
  }

  /** The verifiers that still belong to one of `hashes` under this secret. */
  keep(hashes: string[], verifiers: string[]): string[] {
    if (!this.secret || !verifiers.length) return [];
    const tags = new Set(hashes.map((h) => this.tag(h)));
    return verifiers.filter((v) => tags.has(v.slice(0, v.indexOf("."))));
  }
}
