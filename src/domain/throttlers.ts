// Throttler administration (document 001 §4.2, §5.5): the three fixed throttlers and their cases,
// for developers and platform admins. The built-in cases are listed with the others and, while
// active, refuse changes by name.
import type { Principal } from "../auth/principal.ts";
import { fail } from "../core/errors.ts";
import { objectBody } from "../core/validate.ts";
import { type CaseRow, casesRepo } from "../store/throttle.ts";
import { BUILT_IN_CASES, parseCase, THROTTLERS, type ThrottlerName, throttlerName } from "../throttle/cases.ts";
import type { Throttle } from "../throttle/throttle.ts";
import type { DomainDeps } from "./deps.ts";

export class Throttlers {
  constructor(private readonly d: DomainDeps, private readonly engine: Throttle) {}

  private guard(p: Principal) {
    if (p.kind !== "developer") throw fail("DEVELOPER_ONLY", "throttler administration needs a developer or platform admin token");
  }

  private toWire(r: CaseRow, builtIn: boolean) {
    return {
      throttler_name: r.throttler_name, case_name: r.case_name, system_key: r.system_key, consumer: r.consumer, resource: r.resource,
      limiter_type: r.limiter_type, max_num: r.max_num, duration: r.duration, priority: r.priority, built_in: builtIn,
      created_at: r.created_at, updated_at: r.updated_at,
    };
  }

  private async casesOf(t: ThrottlerName) {
    const builtIn = this.engine.builtInRows().filter((r) => r.throttler_name === t).map((r) => this.toWire(r, true));
    const own = (await casesRepo.all(this.d.db)).filter((r) => r.throttler_name === t).map((r) => this.toWire(r, false));
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
    this.guard(p);
    return Promise.all(THROTTLERS.map(async (name) => ({ name, cases: await this.casesOf(name) })));
  }

  async get(p: Principal, name: unknown) {
    this.guard(p);
    const t = throttlerName(name);
    return { name: t, cases: await this.casesOf(t) };
  }

  async create(p: Principal, name: unknown, body: unknown) {
    this.guard(p);
    const t = throttlerName(name);
    const row = parseCase(t, objectBody(body));
    await this.d.db.tx(async (tx) => {
      if (this.isBuiltIn(t, row.case_name) || await casesRepo.get(tx, t, row.case_name)) throw fail("ALREADY_EXISTS", `case '${row.case_name}' already exists in '${t}'`);
      await casesRepo.put(tx, row);
    });
    await this.engine.changed();
    return this.toWire(row, false);
  }

  async update(p: Principal, name: unknown, caseName: string, body: unknown) {
    this.guard(p);
    const t = throttlerName(name);
    this.protectedCase(t, caseName);
    const cur = await casesRepo.get(this.d.db, t, caseName);
    if (!cur) throw fail("NOT_FOUND", `case '${caseName}' does not exist in '${t}'`);
    const row = parseCase(t, objectBody(body ?? {}), cur);
    await casesRepo.put(this.d.db, row);
    await this.engine.changed();
    return this.toWire(row, false);
  }

  async remove(p: Principal, name: unknown, caseName: string) {
    this.guard(p);
    const t = throttlerName(name);
    this.protectedCase(t, caseName);
    if (!(await casesRepo.delete(this.d.db, t, caseName)).changes) throw fail("NOT_FOUND", `case '${caseName}' does not exist in '${t}'`);
    await this.engine.changed();
    return { success: true, deleted: 1 };
  }

  /** Every case of one throttler, or of all three; the protected built-in cases stay. */
  async clear(p: Principal, name?: unknown) {
    this.guard(p);
    const r = name === undefined ? await casesRepo.deleteAll(this.d.db) : await casesRepo.deleteThrottler(this.d.db, throttlerName(name));
    await this.engine.changed();
    return { success: true, deleted: r.changes };
  }
}
