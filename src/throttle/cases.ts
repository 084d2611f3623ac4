// Throttling cases: the three fixed throttlers, case validation, the
// built-in cases, and compiling a case into matchers. A compiled case answers "does this request
// match?" and "which bucket does it count in?" without allocating when it does not match.
import { Memoirist } from "memoirist";
import { fail } from "../core/errors.ts";
import { knownFields } from "../core/validate.ts";
import type { CaseRow } from "../store/throttle.ts";

export const THROTTLERS = ["HTTP Requests", "MQTT Connections", "MQTT Publishes"] as const;
export type ThrottlerName = (typeof THROTTLERS)[number];
export const LIMITER_TYPES = ["frequency", "concurrency"] as const;

export function throttlerName(v: unknown): ThrottlerName {
  const n = THROTTLERS.find((t) => t === v);
  if (!n) throw fail("NOT_FOUND", `throttler '${String(v)}' does not exist (there are exactly three: ${THROTTLERS.join(", ")})`);
  return n;
}

/** What a built-in case counts beyond the plain case fields (never stored, never on the wire). */
export type Counts =
  /** every request it matches, like any case */
  | "requests"
  /** failed sign-ins only, as identity servers lock out: max_num failures within `duration` lock
   *  the account out for a time that doubles with each lockout up to `duration`, and a good
   *  sign-in clears the count. Only requests that sign in with credentials they carry match
   *  (subject.signIn): other calls on the same path, such as those of a device named "auth", pass. */
  | "failures";

export type BuiltInCase = Omit<CaseRow, "created_at" | "updated_at"> & { counts: Counts };

const bruteForce = (case_name: string, resource: string, system_key: string, consumer: string, counts: Counts): BuiltInCase =>
  ({ throttler_name: "HTTP Requests", case_name, system_key, consumer, resource, limiter_type: "frequency", max_num: 3, duration: 600, priority: 200, counts });

/** The built-in cases: user sign-in and password change (priority 200, 3 per 600 s, a bucket per
 *  system and per consumer, every attempt counted), and a lockout after 3 failures on every other
 *  way to try a password or key (a gateway that signs in again and again with its right key is
 *  never refused). Developers sign in to the platform, not to a system: their bucket is per email alone. */
export const BUILT_IN_CASES: BuiltInCase[] = [
  bruteForce("Block brute force auth", "/api/v/1/user/auth", "?", "?", "requests"),
  bruteForce("Block brute force password reset core api", "/api/v/1/user/pass", "?", "?", "requests"),
  // a bucket per login name (email=?): a refresh-token grant names nobody and guesses nothing
  bruteForce("Block brute force device auth", "/api/v/2/devices/{systemKey}/auth", "?", "email=?", "failures"),
  bruteForce("Block brute force developer auth", "/admin/auth", "*", "email=?", "failures"),
  // only calls carrying an email and password (http_basic_auth) name a user
  bruteForce("Block brute force webhook basic auth", "/api/v/4/webhook/execute/{systemKey}/*", "?", "email=?", "failures"),
];

/** A user's or developer's email as a consumer: sign-in finds them by their lower-case email, so
 *  every spelling of one address is one consumer. */
export const emailKey = (email: string) => email.trim().toLowerCase();

const FIELDS = new Set(["throttler_name", "case_name", "system_key", "consumer", "resource", "limiter_type", "max_num", "duration", "priority"]);

const text = (b: Record<string, unknown>, k: string, required: boolean): string | undefined => {
  const v = b[k];
  if (v === undefined || v === null) { if (required) throw fail("INVALID_ARGUMENT", `${k} is required`); return undefined; }
  if (typeof v !== "string") throw fail("INVALID_ARGUMENT", `${k} must be a string`);
  if (required && !v.trim()) throw fail("INVALID_ARGUMENT", `${k} must not be empty`);
  return v.trim();
};
const int = (b: Record<string, unknown>, k: string): number | undefined => {
  const v = b[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isSafeInteger(v)) throw fail("INVALID_ARGUMENT", `${k} must be a whole number`);
  return v;
};

/** A case row from a create body, or from an update body over the current row (only sent fields change). */
export function parseCase(throttler: ThrottlerName, b: Record<string, unknown>, base?: CaseRow): CaseRow {
  knownFields(b, FIELDS);
  if (b.throttler_name !== undefined && b.throttler_name !== throttler) throw fail("INVALID_ARGUMENT", `throttler_name '${String(b.throttler_name)}' differs from the throttler in the path ('${throttler}')`);
  const caseName = text(b, "case_name", !base);
  if (base && caseName !== undefined && caseName !== base.case_name) throw fail("INVALID_ARGUMENT", "case_name cannot change (delete the case and create it again)");
  const name = caseName ?? base!.case_name;
  if (name.length > 200) throw fail("INVALID_ARGUMENT", "case_name is longer than 200 characters");
  const systemKey = text(b, "system_key", !base) ?? base!.system_key;
  const consumer = text(b, "consumer", !base) ?? base!.consumer;
  parseConsumer(consumer);
  let resource = text(b, "resource", false);
  if (throttler === "MQTT Connections") {
    if (resource) throw fail("INVALID_ARGUMENT", "resource must be omitted or empty for MQTT Connections cases");
    resource = "";
  } else {
    resource ??= base?.resource;
    if (!resource) throw fail("INVALID_ARGUMENT", `resource is required for ${throttler} cases`);
    resourceMatcher(resource); // a pattern must compile
  }
  const limiter = b.limiter_type ?? base?.limiter_type;
  if (limiter === undefined) throw fail("INVALID_ARGUMENT", "limiter_type is required");
  if (typeof limiter !== "string" || !(LIMITER_TYPES as readonly string[]).includes(limiter)) throw fail("INVALID_ARGUMENT", `limiter_type must be one of ${LIMITER_TYPES.join(", ")}`);
  // an omitted max_num is 0: the case blocks everything it matches
  const maxNum = int(b, "max_num") ?? base?.max_num ?? 0;
  if (maxNum < -1) throw fail("INVALID_ARGUMENT", "max_num must be -1 (unlimited), 0 (always throttle) or a limit");
  // duration is ignored by concurrency limiters (kept as sent)
  const duration = int(b, "duration") ?? base?.duration ?? null;
  if (limiter === "frequency") {
    if (duration === null) throw fail("INVALID_ARGUMENT", "duration (seconds) is required for frequency limiters");
    if (duration <= 0) throw fail("INVALID_ARGUMENT", "duration must be at least 1 second");
  }
  const priority = int(b, "priority") ?? base?.priority;
  if (priority === undefined) throw fail("INVALID_ARGUMENT", "priority is required");
  if (priority <= 0) throw fail("INVALID_ARGUMENT", "priority must be greater than 0");
  const now = new Date().toISOString();
  return {
    throttler_name: throttler, case_name: name, system_key: systemKey, consumer, resource, limiter_type: limiter,
    max_num: maxNum, duration, priority, created_at: base?.created_at ?? now, updated_at: now,
  };
}

// ---- matching ---------------------------------------------------------------------------------

/** What a request offers to the matchers. `email` is read lazily: finding it can cost a body read. */
export interface Subject {
  systemKey: string;
  resource: string;
  ip: string;
  /** a user's email (see emailKey) or a device's name ("" when anonymous) */
  email(): string;
  /** the request signs in with credentials it carries (cases counting sign-ins match only these) */
  readonly signIn?: boolean;
}

/** One slot filter: `*` (match all, one bucket), `?` (a bucket per value) or a value. Every
 *  filter has the same shape, so the matcher's property reads stay monomorphic (it runs once per
 *  case per request). */
export const ANY = 0, EACH = 1, EXACT = 2, ROUTE = 3;
export interface Filter { kind: number; value: string; prefix: string; router: Memoirist<true> | null; lower: string }
const filter = (v: string): Filter => ({ kind: v === "*" ? ANY : v === "?" ? EACH : EXACT, value: v, prefix: "", router: null, lower: v.toLowerCase() });

export interface ConsumerMatcher { typed: boolean; legacy: Filter; email: Filter; ip: Filter }

export function parseConsumer(v: string): ConsumerMatcher {
  if (!v.includes("=")) return { typed: false, legacy: filter(v), email: filter("*"), ip: filter("*") };
  const slots: Record<string, string> = {};
  for (const part of v.split(",")) {
    const eq = part.indexOf("=");
    const k = part.slice(0, eq).trim(), val = part.slice(eq + 1).trim();
    if (eq < 0 || !k || !val) throw fail("INVALID_ARGUMENT", `consumer '${v}': each part is slot=value (email=...,ip_address=...)`);
    if (k !== "email" && k !== "ip_address") throw fail("INVALID_ARGUMENT", `consumer '${v}': unknown slot '${k}' (email, ip_address)`);
    if (k in slots) throw fail("INVALID_ARGUMENT", `consumer '${v}': slot '${k}' given twice`);
    slots[k] = val;
  }
  return { typed: true, legacy: filter("*"), email: filter(slots.email ?? "*"), ip: filter(slots.ip_address ?? "*") };
}

/** The bucket part of one slot, or null when the filter does not match the value. */
function slot(f: Filter, value: string): string | null {
  if (f.kind === ANY) return "*";
  if (f.kind === EACH) return value ? value : null;
  return value === f.value ? value : null;
}

/** An exact consumer value against the subject's: emails come lower-case (emailKey), so a value
 *  written with capitals still names its user; device names compare exactly, as their lookup does. */
const sameConsumer = (f: Filter, value: string) => value === f.value || (value !== "" && value === f.lower);

/** Resource: exact text, `?`/`*`, or a route pattern (contains `/`) with {param} and a trailing `*`. */
export function resourceMatcher(v: string): Filter {
  if (!v.includes("/")) return filter(v);
  const path = (v.startsWith("/") ? v : "/" + v).replace(/\{([^/{}]+)\}/g, (_m, p: string) => {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(p)) throw fail("INVALID_ARGUMENT", `resource '${v}': placeholder {${p}} must be a plain name`);
    return ":" + p;
  });
  if (/[{}]/.test(path)) throw fail("INVALID_ARGUMENT", `resource '${v}': a placeholder is a whole path element in {}`);
  const star = path.indexOf("*");
  if (star >= 0 && star !== path.length - 1) throw fail("INVALID_ARGUMENT", `resource '${v}': * may only end the pattern`);
  const router = new Memoirist<true>();
  try { router.add("M", path, true); } catch (e) { throw fail("INVALID_ARGUMENT", `resource '${v}': ${(e as Error).message}`); }
  // the literal start of the pattern: most paths are told apart by it without asking the router
  const open = path.search(/[:*]/);
  return { kind: ROUTE, value: v, prefix: open < 0 ? path : path.slice(0, open), router, lower: v };
}

export interface CompiledCase {
  row: CaseRow;
  builtIn: boolean;
  /** counts failed sign-ins only (see Counts), and so matches only subjects that sign in */
  lockout: boolean;
  system: Filter;
  resource: Filter;
  consumer: ConsumerMatcher;
  /** the start of every bucket key of this case */
  keyPrefix: string;
  /** the one bucket key of a case without a `?` slot (made once, not per request), else null */
  fixedKey: string | null;
  /** the decision letting a request through by this case, shared (decisions are not changed) */
  allowed: Readonly<{ ok: true; caseName: string }>;
}

export function compileCase(row: CaseRow, builtIn = false, counts: Counts = "requests"): CompiledCase {
  const system = filter(row.system_key), resource = row.resource ? resourceMatcher(row.resource) : filter("*"), consumer = parseConsumer(row.consumer);
  const keyPrefix = `${row.throttler_name}\u0000${row.case_name}\u0000`;
  const fixed = (f: Filter) => (f.kind === ANY ? "*" : f.value);
  const fixedKey = [system, resource, consumer.legacy, consumer.email, consumer.ip].some((f) => f.kind === EACH) ? null
    : bucketKey(keyPrefix, fixed(system), fixed(resource), consumer.typed ? `${fixed(consumer.email)},${fixed(consumer.ip)}` : fixed(consumer.legacy));
  return {
    row, builtIn, lockout: counts === "failures", system, resource, consumer, keyPrefix, fixedKey,
    allowed: Object.freeze({ ok: true, caseName: row.case_name }),
  };
}

const bucketKey = (prefix: string, system: string, resource: string, consumer: string) => `${prefix}${system}\u0000${resource}\u0000${consumer}`;

/** Whether the case's resource filter lets this resource through (a path or a topic). */
export function resourceMatches(c: CompiledCase, resource: string): boolean {
  const r = c.resource;
  if (r.kind === ROUTE) {
    const path = resource.charCodeAt(0) === 47 /* / */ ? resource : "/" + resource;
    return path.startsWith(r.prefix) && r.router!.find("M", path) !== null;
  }
  return slot(r, resource) !== null;
}

/** The bucket key when system and consumer match too (the resource already did), or null. */
export function matchRest(c: CompiledCase, s: Subject): string | null {
  if (c.lockout && s.signIn !== true) return null;
  const sys = slot(c.system, s.systemKey);
  if (sys === null) return null;
  const r = c.resource;
  const res = r.kind === EACH ? s.resource : r.kind === ANY ? "*" : r.value;
  let who: string | null;
  const k = c.consumer;
  if (!k.typed) {
    const f = k.legacy;
    if (f.kind === ANY) who = "*";
    else if (f.kind === EACH) who = s.email() || s.ip || null;
    else who = f.value === s.ip || sameConsumer(f, s.email()) ? f.value : null;
  } else {
    // a slot that matches anything does not read its value: the address costs a lookup
    const e = k.email.kind === ANY ? "*" : k.email.kind === EACH ? slot(k.email, s.email()) : sameConsumer(k.email, s.email()) ? k.email.value : null;
    if (e === null) return null;
    const i = k.ip.kind === ANY ? "*" : slot(k.ip, s.ip);
    who = i === null ? null : c.fixedKey !== null ? "" : `${e},${i}`;
  }
  if (who === null) return null;
  return c.fixedKey ?? bucketKey(c.keyPrefix, sys, res, who);
}

/** The bucket key when the case matches the subject, or null. */
export const matchCase = (c: CompiledCase, s: Subject): string | null => (resourceMatches(c, s.resource) ? matchRest(c, s) : null);
