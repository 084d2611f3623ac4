// Service caches: named caches a system's code services share (ClearBlade.Cache). Developers
// define them (name, TTL, description; at most MAX_CACHES per system) on
// /admin/v/4/service_caches. Services read and write the values with the rights of the run's
// user: the role grant `servicecaches` on the cache by name or `allservicecaches` (read for get,
// getAll and keys; create or update for set, setnx and setMultiple; delete for delete and flush).
// Values are JSON, at most CACHE_MAX_BYTES per cache, and expire together when no write came
// within the cache's TTL (store/cacheValues.ts keeps them in memory, cluster/cacheValues.ts in
// Redis). A node that keeps the values itself also tells its code workers what they may keep a
// copy of (cacheVersions.ts): the `_m` of a read's or a write's answer; a worker may then make a
// set itself and post it here (applyPosted), and every call on a cache's values here first waits
// for the posted sets issued before it.
import { LEVEL } from "../auth/permissions.ts";
import type { Principal } from "../auth/principal.ts";
import { TtlCache } from "../core/cache.ts";
import { fail, notFound } from "../core/errors.ts";
import { newUuid, nowIso } from "../core/ids.ts";
import { jsonTooDeep, knownFields, MAX_JSON_DEPTH, objectBody } from "../core/validate.ts";
import { CACHE_KEY_MAX, CACHE_MAX_BYTES, type CacheRef, type CacheValueStore, keyMatches, MemoryCacheValues, pairBytes, type WriteOutcome } from "../store/cacheValues.ts";
import { type ServiceCacheRow, serviceCachesRepo } from "../store/serviceCaches.ts";
import { CacheVersions, type MirrorNote, type PostedSet } from "./cacheVersions.ts";
import type { DomainDeps } from "./deps.ts";
import type { Systems } from "./systems.ts";

export const MAX_CACHES = 10;
export const TTL_MIN_S = 30;
export const TTL_MAX_S = 3600;
/** Cache names and keys() patterns: up to this many characters. */
export const CACHE_NAME_MAX = 256;
export { CACHE_KEY_MAX };
const DESCRIPTION_MAX = 1000;
/** How long a node uses a cache's definition from memory; this node's changes apply at once,
 *  other nodes of a cluster hear of them through the bus. */
const DEFINITION_CACHE_MS = 5_000;

const CREATE_FIELDS = new Set(["name", "description", "ttl", "id", "system_key"]);
const UPDATE_FIELDS = new Set(["name", "description", "ttl", "id", "system_key"]);

export const serviceCacheToWire = (r: ServiceCacheRow) => ({ id: r.id, name: r.name, system_key: r.system_key, ttl: r.ttl, description: r.description });

function checkName(v: unknown): string {
  if (typeof v !== "string" || !v.length || v.length > CACHE_NAME_MAX) throw fail("INVALID_ARGUMENT", `a cache's name must be a string of 1 to ${CACHE_NAME_MAX} characters`);
  if (/[\u0000-\u001f\u007f/]/.test(v)) throw fail("INVALID_ARGUMENT", "a cache's name may not hold control characters or '/'");
  return v;
}

function checkTtl(v: unknown): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < TTL_MIN_S || v > TTL_MAX_S)
    throw fail("INVALID_ARGUMENT", `ttl is required: a whole number of seconds from ${TTL_MIN_S} to ${TTL_MAX_S}`);
  return v;
}

function checkDescription(v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string" || v.length > DESCRIPTION_MAX) throw fail("INVALID_ARGUMENT", `description must be a string of up to ${DESCRIPTION_MAX} characters`);
  return v;
}

function checkKey(v: unknown): string {
  if (typeof v !== "string" || !v.length || v.length > CACHE_KEY_MAX) throw fail("INVALID_ARGUMENT", `a cache key must be a string of 1 to ${CACHE_KEY_MAX} characters`);
  return v;
}

/** A value as stored: its JSON text. */
function valueJson(v: unknown, key: string): string {
  if (v === undefined) throw fail("INVALID_ARGUMENT", `the value of '${key}' is missing: a cache holds JSON values (undefined and functions cannot be stored)`);
  const json = JSON.stringify(v);
  if (json.length > CACHE_MAX_BYTES) throw fail("INVALID_ARGUMENT", `the value of '${key}' is over a cache's ${CACHE_MAX_BYTES} bytes`);
  if (jsonTooDeep(json)) throw fail("INVALID_ARGUMENT", `the value of '${key}' is nested deeper than ${MAX_JSON_DEPTH} levels`);
  return json;
}

/** What the writes need: create or update, either will do (a set may make a key or change it). */
const WRITE = LEVEL.CREATE | LEVEL.UPDATE;
/** A cache as a value call uses it: where its values are, and the levels the caller holds. */
type CacheUse = CacheRef & { held: number };
/** A write's answer to a code worker (what it may keep), when the node has versions. */
type Noted = { _m: MirrorNote } | null;

const levelNames = (levels: number) =>
  [["read", LEVEL.READ], ["create", LEVEL.CREATE], ["update", LEVEL.UPDATE], ["delete", LEVEL.DELETE]].filter(([, l]) => levels & (l as number)).map(([n]) => n).join(" or ");

export class ServiceCaches {
  private readonly definitions = new TtlCache<string, ServiceCacheRow | null>(DEFINITION_CACHE_MS, 10_000);
  /** The values' versions, when this node keeps the values (null in a cluster). */
  readonly versions: CacheVersions | null;
  /** When each cache written on this node expires unless written again (epoch ms; by values id). */
  private readonly expiries = new Map<string, number>();
  /** The bytes each cache held after its last write here (by values id): what a write adds to
   *  its slot's bound is the change from that (cacheVersions.ts). */
  private readonly held = new Map<string, number>();

  constructor(private readonly d: DomainDeps, private readonly systems: Systems, private readonly values: CacheValueStore) {
    this.versions = values instanceof MemoryCacheValues
      ? new CacheVersions((slot, ticket) => d.log.warn("a cache set a code worker took a ticket for never came (the worker ended first): later calls go on", { slot, ticket }))
      : null;
    // what workers remember of runs' rights on caches goes as soon as they may have changed
    const versions = this.versions;
    if (versions) for (const changed of ["permissions.changed", "system.changed"] as const) d.signals.on(changed, () => versions.rightsChanged());
    d.signals.on("serviceCache.changed", ({ systemKey, name }) => {
      versions?.rightsChanged();
      if (name === null) this.definitions.deleteWhere((_, k) => k.startsWith(`${systemKey}/`));
      else this.definitions.delete(`${systemKey}/${name}`);
    });
  }

  // ---- definitions (developers) -----------------------------------------------------------------

  async list(p: Principal, systemKey: string) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    return (await serviceCachesRepo.list(this.d.db, s.system_key)).map(serviceCacheToWire);
  }

  async get(p: Principal, systemKey: string, name: string) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    const r = await serviceCachesRepo.get(this.d.db, s.system_key, name);
    if (!r) throw notFound("cache", name, "Code");
    return serviceCacheToWire(r);
  }

  async create(p: Principal, systemKey: string, name: string, body: unknown) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    const b = knownFields(objectBody(body), CREATE_FIELDS);
    checkName(name);
    if (b.name !== undefined && b.name !== name) throw fail("INVALID_ARGUMENT", `body: name '${String(b.name)}' is not the path's '${name}'`);
    const ttl = checkTtl(b.ttl);
    const description = checkDescription(b.description) ?? "";
    const now = nowIso();
    await this.d.db.tx(async (tx) => {
      if (await serviceCachesRepo.get(tx, s.system_key, name)) throw fail("ALREADY_EXISTS", `cache '${name}' already exists`);
      if ((await serviceCachesRepo.count(tx, s.system_key)) >= MAX_CACHES) throw fail("INVALID_ARGUMENT", `a system has at most ${MAX_CACHES} caches`);
      const row = { system_key: s.system_key, name, id: newUuid(), ttl, description, created_at: now, updated_at: now };
      await serviceCachesRepo.put(tx, row);
      // the definition deploys to edges (the values do not)
      await this.d.changes.record(tx, s.system_key, "servicecache", name, "upsert", row);
    });
    this.forget(s.system_key, name);
    return { success: true };
  }

  /** A new TTL applies from the cache's next write; the values stay. */
  async update(p: Principal, systemKey: string, name: string, body: unknown) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    const b = knownFields(objectBody(body), UPDATE_FIELDS);
    if (b.name !== undefined && b.name !== name) throw fail("INVALID_ARGUMENT", "a cache cannot be renamed");
    const ttl = checkTtl(b.ttl);
    const description = checkDescription(b.description);
    await this.d.db.tx(async (tx) => {
      const r = await serviceCachesRepo.get(tx, s.system_key, name);
      if (!r) throw notFound("cache", name, "Code");
      const next = { ...r, ttl, description: description ?? r.description, updated_at: nowIso() };
      await serviceCachesRepo.put(tx, next);
      await this.d.changes.record(tx, s.system_key, "servicecache", name, "upsert", next);
    });
    this.forget(s.system_key, name);
    return { success: true };
  }

  /** The definition and every value of the cache. */
  async remove(p: Principal, systemKey: string, name: string) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    const r = await this.d.db.tx(async (tx) => {
      const r = await serviceCachesRepo.get(tx, s.system_key, name);
      if (!r) throw notFound("cache", name, "Code");
      await serviceCachesRepo.delete(tx, s.system_key, name);
      await this.d.changes.record(tx, s.system_key, "servicecache", name, "delete", { name });
      return r;
    });
    this.forget(s.system_key, name);
    await this.settled({ systemKey: s.system_key, id: r.id, ttlMs: r.ttl * 1000 });
    await this.values.flush({ systemKey: s.system_key, id: r.id, ttlMs: r.ttl * 1000 });
    this.emptied({ systemKey: s.system_key, id: r.id });
    this.changed({ systemKey: s.system_key, id: r.id });
    this.expiries.delete(`${s.system_key}/${r.id}`);
    return { success: true };
  }

  /** Drops what this node remembers of a system's cache definitions (of one cache, or all). */
  forget(systemKey: string, name?: string | null) { this.d.signals.emit("serviceCache.changed", { systemKey, name: name ?? null }); }

  /** A deleted system: its definitions went with it (the database cascades), its values go here. */
  async forgetSystem(systemKey: string) {
    this.forget(systemKey);
    await this.values.dropSystem(systemKey);
    for (const id of this.held.keys()) if (id.startsWith(`${systemKey}/`)) this.emptied({ systemKey, id: id.slice(systemKey.length + 1) });
    this.versions?.bumpAll();
    for (const k of this.expiries.keys()) if (k.startsWith(`${systemKey}/`)) this.expiries.delete(k);
  }

  // ---- values (code services) -------------------------------------------------------------------

  /** The cache as its store knows it, if the run's user holds one of `levels` on it. */
  private async cache(p: Principal, systemKey: string, name: unknown, levels: number, what: string): Promise<CacheUse> {
    const n = checkName(name);
    const s = this.systems.accessNow(p, systemKey) ?? (await this.systems.access(p, systemKey));
    const res = { kind: "item" as const, itemKind: "servicecaches" as const, name: n };
    const held = this.d.perms.levelNow(p, res) ?? (await this.d.perms.level(p, res));
    if (!(held & levels)) throw fail("PERMISSION_DENIED", `not allowed to ${what} cache '${n}' (needs ${levelNames(levels)} in the role permission servicecaches or allservicecaches)`);
    const key = `${s.system_key}/${n}`;
    const r = this.definitions.get(key) ?? (await this.definitions.getOr(key, async () => (await serviceCachesRepo.get(this.d.db, s.system_key, n)) ?? null));
    if (!r) throw notFound("cache", n, "Code");
    return { systemKey: s.system_key, id: r.id, ttlMs: r.ttl * 1000, held };
  }

  // ---- what a code worker may keep (cacheVersions.ts) -------------------------------------------

  /** The note for a worker: with `v`, the version the answer's values hold at. */
  private note(c: CacheUse, v?: number): Noted {
    if (!this.versions) return null;
    const m: MirrorNote = { id: c.id, s: this.versions.slotOf(c.systemKey, c.id), lv: c.held, sk: c.systemKey, ttl: c.ttlMs };
    const x = this.expiries.get(`${c.systemKey}/${c.id}`);
    if (v !== undefined && x !== undefined) { m.v = v; m.x = x; }
    return { _m: m };
  }

  /** The cache's version before a change (undefined without versions). */
  private before(c: CacheRef): number | undefined {
    return this.versions?.current(this.versions.slotOf(c.systemKey, c.id));
  }

  /** After a change of the values: copies of them go; the version the change made, if it was the
   *  last change. */
  private changed(c: Pick<CacheRef, "systemKey" | "id">, before?: number): number | undefined {
    return this.versions?.bump(this.versions.slotOf(c.systemKey, c.id), before);
  }

  /** Once the sets workers made on the cache's slot before now are applied (cacheVersions.ts). */
  private settled(c: CacheRef): Promise<void> | undefined {
    return this.versions?.settled(this.versions.slotOf(c.systemKey, c.id));
  }

  private async write(c: CacheUse, name: string, pairs: [string, string][], onlyIfAbsent: boolean): Promise<{ done: boolean; noted: Noted }> {
    const before = this.before(c);
    // the pairs' bytes count in the slot's bound before the tickets are looked at: a worker that
    // sets after this counts them, and one that set before is waited for
    const slot = this.versions?.slotOf(c.systemKey, c.id);
    const reserved = slot === undefined ? 0 : pairs.reduce((n, [k, v]) => n + pairBytes(k, v), 0);
    if (slot !== undefined) this.versions!.reserve(slot, reserved);
    let o: Awaited<ReturnType<CacheValueStore["set"]>> | undefined;
    // (taken before the write, so never later than the store's own expiry)
    let expiresAt = 0;
    try {
      await this.settled(c);
      expiresAt = Date.now() + c.ttlMs;
      o = await this.values.set(c, pairs, onlyIfAbsent);
    } finally {
      if (slot !== undefined) this.versions!.reserve(slot, this.heldNow(c, o) - reserved);
    }
    o = o!;
    if (o.done === "full") throw fail("INVALID_ARGUMENT", `cache '${name}' would hold ${o.bytes} bytes, over its limit of ${CACHE_MAX_BYTES} (1 MB): nothing was set`);
    if (!this.versions) return { done: o.done === "set", noted: null };
    // every write restarts the cache's TTL, setnx's that sets nothing too
    this.expiries.set(`${c.systemKey}/${c.id}`, expiresAt);
    return { done: o.done === "set", noted: this.note(c, this.changed(c, before)) };
  }

  /** After a write (o: its outcome, none when it failed): by how much the cache's bytes changed
   *  since the last write here, which becomes what the cache holds. */
  private heldNow(c: CacheRef, o?: { done: string; bytes: number }): number {
    if (!o || o.done === "full") return 0;
    const id = `${c.systemKey}/${c.id}`, was = this.held.get(id) ?? 0;
    this.held.set(id, o.bytes);
    return o.bytes - was;
  }

  /** A cache's values went: what it held no longer counts in its slot's bound. */
  private emptied(c: Pick<CacheRef, "systemKey" | "id">) {
    const id = `${c.systemKey}/${c.id}`, was = this.held.get(id);
    if (was === undefined || !this.versions) return;
    this.held.delete(id);
    this.versions.reserve(this.versions.slotOf(c.systemKey, c.id), -was);
  }

  /** A set a code worker made itself (code/cacheMirror.ts): its rights, key and value were checked
   *  there against what this thread told it, and its bytes reserved; applied in ticket order,
   *  its TTL counted from when it was made. */
  applyPosted(m: PostedSet) {
    const versions = this.versions;
    if (!versions || !Number.isInteger(m.s) || m.s < 0 || m.s >= versions.slots || !Number.isInteger(m.n)) return;
    if (m.k === undefined || m.j === undefined || m.sk === undefined || m.id === undefined || m.ttl === undefined || m.at === undefined) { versions.posted(m.s, m.n, null); return; }
    const { s: slot, k, j, at, ttl } = m, reserved = m.r ?? 0;
    // (versions are kept only over values in this node's memory, which sets them at once)
    const values = this.values as MemoryCacheValues;
    versions.posted(slot, m.n, () => {
      let o: WriteOutcome | undefined;
      // its TTL counted from when the worker made it
      const c: CacheRef = { systemKey: m.sk!, id: m.id!, ttlMs: Math.max(1, at + ttl - Date.now()) };
      try {
        o = values.setNow(c, [[k, j]], false);
        // (its worker bumped the version when it made the set)
        if (o.done === "full") this.d.log.error("a cache set a code worker made could not be applied: the cache was full", { cache: m.id, bytes: o.bytes });
        else this.expiries.set(`${c.systemKey}/${c.id}`, at + ttl);
      } catch (err) {
        this.d.log.error("a cache set a code worker made could not be applied", { cache: m.id, err });
      } finally {
        versions.reserve(slot, this.heldNow(c, o) - reserved);
      }
      return undefined;
    });
  }

  async set(p: Principal, systemKey: string, name: unknown, key: unknown, value: unknown): Promise<Noted> {
    const c = await this.cache(p, systemKey, name, WRITE, "write to");
    const k = checkKey(key);
    return (await this.write(c, name as string, [[k, valueJson(value, k)]], false)).noted;
  }

  /** Sets the key unless it exists: whether it did. */
  async setnx(p: Principal, systemKey: string, name: unknown, key: unknown, value: unknown): Promise<boolean> {
    const c = await this.cache(p, systemKey, name, WRITE, "write to");
    const k = checkKey(key);
    return (await this.write(c, name as string, [[k, valueJson(value, k)]], true)).done;
  }

  /** Sets every pair of an object at once (all or none). */
  async setMultiple(p: Principal, systemKey: string, name: unknown, data: unknown): Promise<Noted> {
    if (data === null || typeof data !== "object" || Array.isArray(data)) throw fail("INVALID_ARGUMENT", "setMultiple takes an object of keys and values");
    const c = await this.cache(p, systemKey, name, WRITE, "write to");
    const pairs: [string, string][] = Object.entries(data).map(([k, v]) => [checkKey(k), valueJson(v, k)]);
    return (await this.write(c, name as string, pairs, false)).noted;
  }

  /** The key's value; `found` false when it (or the whole cache, expired) is missing. */
  async getValue(p: Principal, systemKey: string, name: unknown, key: unknown): Promise<{ found: boolean; value?: unknown; _m?: MirrorNote }> {
    const c = await this.cache(p, systemKey, name, LEVEL.READ, "read");
    const k = checkKey(key);
    // the version before the read: a change that comes while it reads makes a newer one (a set a
    // worker made bumps it after taking its ticket: one before this version is waited for)
    const v = this.before(c);
    await this.settled(c);
    const json = await this.values.get(c, k);
    const out: { found: boolean; value?: unknown; _m?: MirrorNote } = json === undefined ? { found: false } : { found: true, value: JSON.parse(json) };
    const noted = this.note(c, v);
    if (noted) out._m = noted._m;
    return out;
  }

  /** Every pair, as an object ({} when empty or expired). */
  async getAll(p: Principal, systemKey: string, name: unknown): Promise<Record<string, unknown>> {
    const c = await this.cache(p, systemKey, name, LEVEL.READ, "read");
    await this.settled(c);
    // fromEntries makes own properties: a key "__proto__" stays a key
    return Object.fromEntries((await this.values.getAll(c)).map(([k, json]) => [k, JSON.parse(json)]));
  }

  /** Keys matching a pattern: `?` one character, `*` any number of them. */
  async keys(p: Principal, systemKey: string, name: unknown, pattern: unknown): Promise<string[]> {
    const pat = pattern === undefined || pattern === null ? "*" : pattern;
    if (typeof pat !== "string" || pat.length > CACHE_NAME_MAX) throw fail("INVALID_ARGUMENT", `a keys pattern must be a string of up to ${CACHE_NAME_MAX} characters ('?' one character, '*' any run of them)`);
    const c = await this.cache(p, systemKey, name, LEVEL.READ, "read");
    await this.settled(c);
    const all = await this.values.keys(c);
    return (pat === "*" ? all : all.filter((k) => keyMatches(pat, k))).sort();
  }

  async delete(p: Principal, systemKey: string, name: unknown, key: unknown): Promise<Noted> {
    const c = await this.cache(p, systemKey, name, LEVEL.DELETE, "delete from");
    await this.settled(c);
    await this.values.delete(c, checkKey(key));
    this.changed(c);
    return this.note(c);
  }

  async flush(p: Principal, systemKey: string, name: unknown): Promise<Noted> {
    const c = await this.cache(p, systemKey, name, LEVEL.DELETE, "flush");
    await this.settled(c);
    await this.values.flush(c);
    this.emptied(c);
    this.changed(c);
    return this.note(c);
  }
}
