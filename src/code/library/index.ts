// The service library: the prelude user code runs after (the core, then every area's
// JavaScript, in one closure) and the host operations it calls. An area is one file here; adding
// one is a line in AREAS.
import { cache } from "./cache.ts";
import { CORE_JS } from "./core.ts";
import { data } from "./data.ts";
import { database } from "./database.ts";
import { devices } from "./devices.ts";
import { globals } from "./globals.ts";
import { http } from "./http.ts";
import { lock } from "./lock.ts";
import { messaging } from "./messaging.ts";
import { roles } from "./roles.ts";
import { mqtt } from "./mqtt.ts";
import { services } from "./services.ts";
import { triggers } from "./triggers.ts";
import type { HostOp, LibraryArea } from "./types.ts";
import { users } from "./users.ts";

const AREAS: LibraryArea[] = [globals, data, messaging, mqtt, services, devices, users, triggers, roles, database, cache, lock, http];

/** Evaluated in every sandbox before the libraries and the service. */
export const PRELUDE = `(function () {\n${CORE_JS}\n${AREAS.map((a) => a.js).join("\n")}\n})();`;

/** An operation as the run's code signed in, when it did (see RunState.as). */
const asSignedIn = (op: HostOp): HostOp => (ctx, args) => op(ctx.run.as ? { ...ctx, p: ctx.run.as.principal } : ctx, args);

/** Every host operation, by name. */
export const OPS: ReadonlyMap<string, HostOp> = (() => {
  const m = new Map<string, HostOp>();
  for (const a of AREAS) for (const [name, op] of Object.entries(a.ops)) {
    if (m.has(name)) throw new Error(`host operation '${name}' is defined twice`);
    m.set(name, asSignedIn(op));
  }
  return m;
})();
