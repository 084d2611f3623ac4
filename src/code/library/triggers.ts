// Triggers and timers from code: ClearBlade.Trigger / ClearBlade.Timer (Create, Fetch, and an
// instance's Update and Delete) and ClearBladeAsync.Triggers() / Timers() (create, read, update
// and delete by query). Everything goes through the triggers domain, as the REST routes do.
import { fail } from "../../core/errors.ts";
import { parseQuery, selectRows } from "../../core/query.ts";
import { objectBody } from "../../core/validate.ts";
import type { HostContext, LibraryArea } from "./types.ts";

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

async function triggersMatching(x: HostContext, q: unknown) {
  return selectRows(await x.e.triggers.listTriggers(x.p, x.systemKey), query(q), TRIGGER_FIELDS);
}
async function timersMatching(x: HostContext, q: unknown) {
  return selectRows(await x.e.triggers.listTimers(x.p, x.systemKey), query(q), TIMER_FIELDS);
}

export const triggers: LibraryArea = {
  ops: {
    "trigger.create": (x, a) => {
      const name = nameArg(a.name, "trigger");
      return x.e.triggers.createTrigger(x.p, x.systemKey, name, definitionBody(x, "trigger", name, a.options));
    },
    "trigger.get": (x, a) => x.e.triggers.getTrigger(x.p, x.systemKey, nameArg(a.name, "trigger")),
    "trigger.update": (x, a) => {
      const name = nameArg(a.name, "trigger");
      return x.e.triggers.updateTrigger(x.p, x.systemKey, name, definitionBody(x, "trigger", name, a.changes));
    },
    "trigger.delete": (x, a) => x.e.triggers.deleteTrigger(x.p, x.systemKey, nameArg(a.name, "trigger")),
    "triggers.read": (x, a) => triggersMatching(x, a.query),
    "triggers.update": async (x, a) => {
      const out = [];
      for (const t of await triggersMatching(x, a.query))
        out.push(await x.e.triggers.updateTrigger(x.p, x.systemKey, t.name, definitionBody(x, "trigger", t.name, a.changes)));
      return out;
    },
    "triggers.delete": async (x, a) => {
      for (const t of await triggersMatching(x, a.query)) await x.e.triggers.deleteTrigger(x.p, x.systemKey, t.name);
      return null;
    },

    "timer.create": (x, a) => {
      const name = nameArg(a.name, "timer");
      return x.e.triggers.createTimer(x.p, x.systemKey, name, definitionBody(x, "timer", name, a.options));
    },
    "timer.get": (x, a) => x.e.triggers.getTimer(x.p, x.systemKey, nameArg(a.name, "timer")),
    "timer.update": (x, a) => {
      const name = nameArg(a.name, "timer");
      return x.e.triggers.updateTimer(x.p, x.systemKey, name, definitionBody(x, "timer", name, a.changes));
    },
    "timer.delete": (x, a) => x.e.triggers.deleteTimer(x.p, x.systemKey, nameArg(a.name, "timer")),
    "timers.read": (x, a) => timersMatching(x, a.query),
    "timers.update": async (x, a) => {
      const out = [];
      for (const t of await timersMatching(x, a.query))
        out.push(await x.e.triggers.updateTimer(x.p, x.systemKey, t.name, definitionBody(x, "timer", t.name, a.changes)));
      return out;
    },
    "timers.delete": async (x, a) => {
      for (const t of await timersMatching(x, a.query)) await x.e.triggers.deleteTimer(x.p, x.systemKey, t.name);
      return null;
    },
  },
};
