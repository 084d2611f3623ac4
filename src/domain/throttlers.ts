// Throttler administration: the three fixed throttlers and their cases,
// for developers (the cases of their own systems) and platform admins (every case). The built-in
// cases are listed with the others and, while active, refuse changes by name.
import type { Principal } from "../auth/principal.ts";
import { fail } from "../core/errors.ts";
import { objectBody } from "../core/validate.ts";
import { systemsRepo } from "../store/systems.ts";
import { type CaseRow, casesRepo } from "../store/throttle.ts";
import { BUILT_IN_CASES, parseCase, THROTTLERS, type ThrottlerName, throttlerName } from "../throttle/cases.ts";
import type { Throttle } from "../throttle/throttle.ts";
import type { DomainDeps } from "./deps.ts";

/** What a developer may change: a platform admin every case (`own` null); any other developer
 *  only the cases whose system_key is exactly one of its own systems. `*` and `?` cases act on
 *  every system (max 0 would lock all users out, an early allow-all case would switch brute-force
 *  protection off), so they are the admin's, like a case naming another developer's system. */
interface Scope { own: Set<string> | null }

const mayChange = (s: Scope, systemKey: string) => s.own === null || s.own.has(systemKey);
/** Listings show a developer its own systems' cases and the platform-wide ones (`*`, `?`, the
 *  built-in cases), which apply to its systems too but are read-only to it; the cases of other
 *  developers' systems stay hidden (their consumers and limits are that developer's business). */
const maySee = (s: Scope, systemKey: string) => mayChange(s, systemKey) || systemKey === "*" || systemKey === "?";

export class Throttlers {
  constructor(private readonly d: DomainDeps, private readonly engine: Throttle) {}

  private async scope(p: Principal): Promise<Scope> {
    if (p.kind !== "developer") throw fail("DEVELOPER_ONLY", "throttler administration needs a developer or platform admin token");
    if (p.admin) return { own: null };
    return { own: new Set((await systemsRepo.byOwner(this.d.db, p.id)).map((s) => s.system_key)) };
  }

  private allowed(s: Scope, t: ThrottlerName, caseName: string, systemKey: string) {
    if (!mayChange(s, systemKey)) {
      const whose = systemKey === "*" || systemKey === "?" ? `applies to every system (system_key '${systemKey}')` : `is for system '${systemKey}', which is not one of yours`;
      throw fail("FORBIDDEN", `case '${caseName}' in '${t}' ${whose}: only a platform admin may change it`);
    }
  }

  private toWire(r: CaseRow, builtIn: boolean) {
    return {
      throttler_name: r.throttler_name, case_name: r.case_name, system_key: r.system_key, consumer: r.consumer, resource: r.resource,
      limiter_type: r.limiter_type, max_num: r.max_num, duration: r.duration, priority: r.priority, built_in: builtIn,
      created_at: r.created_at, updated_at: r.updated_at,
    };
  }

  private async casesOf(s: Scope, t: ThrottlerName) {
    const builtIn = this.engine.builtInRows().filter((r) => r.throttler_name === t).map((r) => this.toWire(r, true));
    const own = (await casesRepo.all(this.d.db)).filter((r) => r.throttler_name === t && maySee(s, r.system_key)).map((r) => this.toWire(r, false));
    return [...builtIn, ...own].sort((a, b) => a.priority - b.priority || (a.case_name < b.case_name ? -1 : 1));
  }

  private isBuiltIn(t: ThrottlerName, caseName: string) {
    return this.engine.builtInsActive && BUILT_IN_CASES.some((c) => c.throttler_name === t && c.case_name === caseName);
  }

  private protectedCase(t: ThrottlerName, caseName: string) {
    if (this.isBuiltIn(t, caseName))
      throw fail("THROTTLE_CASE_PROTECTED", `'${caseName}' is a built-in case and cannot be changed or deleted while the default throttlers are enabled`);
  }

  async list(p: Principal) {
    const s = await this.scope(p);
    return Promise.all(THROTTLERS.map(async (name) => ({ name, cases: await this.casesOf(s, name) })));
  }

  async get(p: Principal, name: unknown) {
    const s = await this.scope(p);
    const t = throttlerName(name);
    return { name: t, cases: await this.casesOf(s, t) };
  }

  async create(p: Principal, name: unknown, body: unknown) {
    const s = await this.scope(p);
    const t = throttlerName(name);
    const row = parseCase(t, objectBody(body));
    this.allowed(s, t, row.case_name, row.system_key);
    await this.d.db.tx(async (tx) => {
      if (this.isBuiltIn(t, row.case_name) || await casesRepo.get(tx, t, row.case_name)) throw fail("ALREADY_EXISTS", `case '${row.case_name}' already exists in '${t}'`);
      await casesRepo.put(tx, row);
    });
    await this.engine.changed();
    return this.toWire(row, false);
  }

  async update(p: Principal, name: unknown, caseName: string, body: unknown) {
    const s = await this.scope(p);
    const t = throttlerName(name);
    this.protectedCase(t, caseName);
    const cur = await casesRepo.get(this.d.db, t, caseName);
    if (!cur) throw fail("NOT_FOUND", `case '${caseName}' does not exist in '${t}'`);
    this.allowed(s, t, caseName, cur.system_key);
    const row = parseCase(t, objectBody(body), cur);
    // nor may a case be moved onto a system the caller could not create it for
    this.allowed(s, t, caseName, row.system_key);
    await casesRepo.put(this.d.db, row);
    await this.engine.changed();
    return this.toWire(row, false);
  }

  async remove(p: Principal, name: unknown, caseName: string) {
    const s = await this.scope(p);
    const t = throttlerName(name);
    this.protectedCase(t, caseName);
    const cur = await casesRepo.get(this.d.db, t, caseName);
    if (!cur) throw fail("NOT_FOUND", `case '${caseName}' does not exist in '${t}'`);
    this.allowed(s, t, caseName, cur.system_key);
    await casesRepo.delete(this.d.db, t, caseName);
    await this.engine.changed();
    return { success: true, deleted: 1 };
  }

  /** Every case of one throttler, or of all three, that the caller may change: a platform admin
   *  clears them all, another developer those of its own systems. The built-in cases stay. */
  async clear(p: Principal, name?: unknown) {
    const s = await this.scope(p);
    const t = name === undefined ? undefined : throttlerName(name);
    let deleted: number;
    if (s.own === null) deleted = (t === undefined ? await casesRepo.deleteAll(this.d.db) : await casesRepo.deleteThrottler(this.d.db, t)).changes;
    else {
      deleted = await this.d.db.tx(async (tx) => {
        let n = 0;
        for (const r of await casesRepo.all(tx))
          if ((t === undefined || r.throttler_name === t) && mayChange(s, r.system_key)) n += (await casesRepo.delete(tx, r.throttler_name, r.case_name)).changes;
        return n;
      });
    }
    await this.engine.changed();
    return { success: true, deleted };
  }
}
