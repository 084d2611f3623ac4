// The service library: the prelude user code runs after (the core, then every area's
// JavaScript, in one closure) and the host operations it calls. An area is one file here; adding
// one is a line in AREAS.
import { CORE_JS } from "./core.ts";
import { data } from "./data.ts";
import { devices } from "./devices.ts";
import { messaging } from "./messaging.ts";
import { mqtt } from "./mqtt.ts";
import { services } from "./services.ts";
import type { HostOp, LibraryArea } from "./types.ts";
import { users } from "./users.ts";

const AREAS: LibraryArea[] = [data, messaging, mqtt, services, devices, users];

/** Evaluated in every sandbox before the libraries and the service. */
export const PRELUDE = `(function () {\n${CORE_JS}\n${AREAS.map((a) => a.js).join("\n")}\n})();`;

/** Every host operation, by name. */
export const OPS: ReadonlyMap<string, HostOp> = (() => {
  const m = new Map<string, HostOp>();
  for (const a of AREAS) for (const [name, op] of Object.entries(a.ops)) {
    if (m.has(name)) throw new Error(`host operation '${name}' is defined twice`);
    m.set(name, op);
  }
  return m;
})();
