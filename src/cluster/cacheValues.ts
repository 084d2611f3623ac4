// Service cache values shared by the nodes of a cluster, in Redis: per cache a hash of keys to
// JSON text (`outpost:cache:<system key>:<cache id>`) and its size in bytes beside it
// (`outpost:cachebytes:...`), both expiring together with PEXPIRE: a write restarts the TTL of
// the whole cache. Writes are scripts, so the size bound holds against any number of writers.
import type { CacheRef, CacheValueStore, WriteOutcome } from "../store/cacheValues.ts";
import { CACHE_MAX_BYTES } from "../store/cacheValues.ts";
import type { SharedRedis } from "./redis.ts";

// KEYS: hash, bytes. ARGV: ttl ms, max bytes, only if absent (1/0), then key, value pairs.
// Answers {1 set | 0 exists | -1 full, bytes}.
const SET_SCRIPT = `
local h, n = KEYS[1], KEYS[2]
local ttl, max, nx = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] == '1'
local total = 0
if redis.call('EXISTS', h) == 1 then total = tonumber(redis.call('GET', n) or '0') end
if nx and redis.call('HEXISTS', h, ARGV[4]) == 1 then
  redis.call('PEXPIRE', h, ttl) redis.call('PEXPIRE', n, ttl)
  return {0, total}
end
for i = 4, #ARGV, 2 do
  local old = redis.call('HGET', h, ARGV[i])
  total = total + #ARGV[i] + #ARGV[i + 1]
  if old then total = total - #ARGV[i] - #old end
end
if total > max then return {-1, total} end
for i = 4, #ARGV, 2 do redis.call('HSET', h, ARGV[i], ARGV[i + 1]) end
redis.call('SET', n, total, 'PX', ttl)
redis.call('PEXPIRE', h, ttl)
return {1, total}`;
// KEYS: hash, bytes. ARGV: key.
const DELETE_SCRIPT = `
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old then redis.call('HDEL', KEYS[1], ARGV[1]) redis.call('DECRBY', KEYS[2], #ARGV[1] + #old) end
return 0`;
// an HGETALL answered as a flat array (a script's reply), whatever protocol the client speaks
const GETALL_SCRIPT = `return redis.call('HGETALL', KEYS[1])`;

const OUTCOMES = { 1: "set", 0: "exists" } as const;

export class RedisCacheValues implements CacheValueStore {
  constructor(private readonly redis: SharedRedis, private readonly maxBytes = CACHE_MAX_BYTES) {}

  private static keys(c: CacheRef) { return [`outpost:cache:${c.systemKey}:${c.id}`, `outpost:cachebytes:${c.systemKey}:${c.id}`]; }

  async set(c: CacheRef, pairs: [string, string][], onlyIfAbsent: boolean): Promise<WriteOutcome> {
    const [r, bytes] = await this.redis.eval<[number, number]>(SET_SCRIPT, RedisCacheValues.keys(c), [c.ttlMs, this.maxBytes, onlyIfAbsent ? 1 : 0, ...pairs.flat()]);
    return { done: r === -1 ? "full" : OUTCOMES[r as 0 | 1], bytes: Number(bytes) };
  }

  async get(c: CacheRef, key: string): Promise<string | undefined> {
    return (await this.redis.send<string | null>("HGET", [RedisCacheValues.keys(c)[0]!, key])) ?? undefined;
  }

  async getAll(c: CacheRef): Promise<[string, string][]> {
    const flat = await this.redis.eval<string[]>(GETALL_SCRIPT, [RedisCacheValues.keys(c)[0]!], []);
    const out: [string, string][] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i]!, flat[i + 1]!]);
    return out;
  }

  async keys(c: CacheRef): Promise<string[]> { return (await this.redis.send<string[]>("HKEYS", [RedisCacheValues.keys(c)[0]!])) ?? []; }

  async delete(c: CacheRef, key: string) { await this.redis.eval(DELETE_SCRIPT, RedisCacheValues.keys(c), [key]); }

  async flush(c: CacheRef) { await this.redis.send("DEL", RedisCacheValues.keys(c)); }

  async dropSystem(systemKey: string) {
    for (const prefix of ["outpost:cache", "outpost:cachebytes"]) {
      let cursor = "0";
      do {
        const [next, found] = await this.redis.send<[string, string[]]>("SCAN", [cursor, "MATCH", `${prefix}:${systemKey}:*`, "COUNT", "1000"]);
        if (found.length) await this.redis.send("DEL", found);
        cursor = String(next);
      } while (cursor !== "0");
    }
  }
}
