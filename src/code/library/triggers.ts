// Triggers and timers from code: ClearBlade.Trigger / ClearBlade.Timer (Create, Fetch, and an
// instance's Update and Delete) and ClearBladeAsync.Triggers() / Timers() (create, read, update
// and delete by query). Everything goes through the triggers domain, as the REST routes do.
import { fail } from "../../core/errors.ts";
import { parseQuery, selectRows } from "../../core/query.ts";
import { objectBody } from "../../core/validate.ts";
import type { HostContext, HostOp, LibraryArea } from "./types.ts";

/** The fields a read, update or delete by query may filter and sort on. */
const TRIGGER_FIELDS = new Set(["name", "system_key", "def_module", "def_name", "service_name", "namespace", "disabled"]);
const TIMER_FIELDS = new Set(["name", "system_key", "timer_key", "description", "start_time", "repeats", "frequency", "service_name", "user_id", "user_type", "namespace", "disabled", "runs", "next_run"]);

/** A trigger's or timer's name as code passes it. */
export function nameArg(v: unknown, what: string): string {
  if (typeof v !== "string" || !v) throw fail("INVALID_ARGUMENT", `a ${what} name is required`);
  if (v.length > 128) throw fail("INVALID_ARGUMENT", `a ${what} name has at most 128 characters`);
  return v;
}

/** Options as the domain takes them: the name and system key, when repeated inside, must be this
 *  definition's and this system's; `key_value_pairs` may come as a list of one-key objects. */
function definitionBody(x: HostContext, what: string, name: string, options: unknown): Record<string, unknown> {
  const { name: inner, system_key, ...b } = objectBody(options, `${what} options`);
  if (inner !== undefined && inner !== name) throw fail("INVALID_ARGUMENT", `options.name '${String(inner).slice(0, 128)}' is not the ${what}'s name '${name}' (a ${what} cannot be renamed)`);
  if (system_key !== undefined && system_key !== x.systemKey) throw fail("INVALID_ARGUMENT", `options.system_key: a service defines ${what}s of its own system only`);
  if (Array.isArray(b.key_value_pairs)) {
    const merged: Record<string, unknown> = {};
    for (const kv of b.key_value_pairs) Object.assign(merged, objectBody(kv, "key_value_pairs[]"));
    b.key_value_pairs = merged;
  }
  if (what === "timer" && typeof b.start_time === "string") b.start_time = rfc3339(b.start_time);
  return b;
}

/** ClearBlade's timers also take "YYYY-MM-DD HH:MM:SS" (UTC): as RFC 3339. */
const rfc3339 = (s: string) => (/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(s) ? `${s.replace(" ", "T")}Z` : s);

const query = (q: unknown) => parseQuery(q ?? undefined, { defaultPageSize: 0 });

/** What the ops of one kind of definition call in the triggers domain. */
interface Definitions {
  fields: ReadonlySet<string>;
  list(x: HostContext): Promise<{ name: string }[]>;
  get(x: HostContext, name: string): Promise<unknown>;
  create(x: HostContext, name: string, body: Record<string, unknown>): Promise<unknown>;
  update(x: HostContext, name: string, body: Record<string, unknown>): Promise<unknown>;
  remove(x: HostContext, name: string): Promise<unknown>;
}

/** The single (`trigger.create`...) and by-query (`triggers.read`...) ops of one kind. */
function definitionOps(what: "trigger" | "timer", d: Definitions): Record<string, HostOp> {
  const matching = async (x: HostContext, q: unknown) => selectRows(await d.list(x), query(q), d.fields);
  return {
    [`${what}.create`]: (x, a) => {
      const name = nameArg(a.name, what);
      return d.create(x, name, definitionBody(x, what, name, a.options));
    },
    [`${what}.get`]: (x, a) => d.get(x, nameArg(a.name, what)),
    [`${what}.update`]: (x, a) => {
      const name = nameArg(a.name, what);
      return d.update(x, name, definitionBody(x, what, name, a.changes));
    },
    [`${what}.delete`]: (x, a) => d.remove(x, nameArg(a.name, what)),
    [`${what}s.read`]: (x, a) => matching(x, a.query),
    [`${what}s.update`]: async (x, a) => {
      const out = [];
      for (const t of await matching(x, a.query)) out.push(await d.update(x, t.name, definitionBody(x, what, t.name, a.changes)));
      return out;
    },
    [`${what}s.delete`]: async (x, a) => {
      for (const t of await matching(x, a.query)) await d.remove(x, t.name);
      return null;
    },
  };
}

export const triggers: LibraryArea = {
  ops: {
    ...definitionOps("trigger", {
      fields: TRIGGER_FIELDS,
      list: (x) => x.e.triggers.listTriggers(x.p, x.systemKey),
      get: (x, name) => x.e.triggers.getTrigger(x.p, x.systemKey, name),
      create: (x, name, body) => x.e.triggers.createTrigger(x.p, x.systemKey, name, body),
      update: (x, name, body) => x.e.triggers.updateTrigger(x.p, x.systemKey, name, body),
      remove: (x, name) => x.e.triggers.deleteTrigger(x.p, x.systemKey, name),
    }),
    ...definitionOps("timer", {
      fields: TIMER_FIELDS,
      list: (x) => x.e.triggers.listTimers(x.p, x.systemKey),
      get: (x, name) => x.e.triggers.getTimer(x.p, x.systemKey, name),
      create: (x, name, body) => x.e.triggers.createTimer(x.p, x.systemKey, name, body),
      update: (x, name, body) => x.e.triggers.updateTimer(x.p, x.systemKey, name, body),
      remove: (x, name) => x.e.triggers.deleteTimer(x.p, x.systemKey, name),
    }),
  },
};
