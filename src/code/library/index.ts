// The service library's host operations: what the prelude (prelude/) calls, run on the main
// thread with the rights of the run's effective user. An area is a file here and one in prelude/;
// adding one is a line in AREAS in each index.
import { adapters } from "./adapters.ts";
import { cache } from "./cache.ts";
import { data } from "./data.ts";
import { database } from "./database.ts";
import { deployments } from "./deployments.ts";
import { secrets } from "./secrets.ts";
import { devices } from "./devices.ts";
import { files } from "./files.ts";
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

const AREAS: LibraryArea[] = [globals, data, messaging, mqtt, services, devices, users, triggers, roles, database, cache, lock, http, files, deployments, secrets, adapters];

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
