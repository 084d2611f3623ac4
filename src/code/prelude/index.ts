// The prelude: the JavaScript every sandbox runs before the service's libraries and the service
// (the core, then every area, in one closure). Its host operations are in library/; an area is a
// file in each folder, and a line in AREAS in each index. The sandbox imports only this side, so
// a code worker loads none of what the host operations need.
import { adapters } from "./adapters.ts";
import type { PreludeArea } from "./area.ts";
import { buffer } from "./buffer.ts";
import { cache } from "./cache.ts";
import { CORE_JS } from "./core.ts";
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
import { missing } from "./missing.ts";
import { mqtt } from "./mqtt.ts";
import { roles } from "./roles.ts";
import { services } from "./services.ts";
import { triggers } from "./triggers.ts";
import { users } from "./users.ts";

const AREAS: PreludeArea[] = [globals, data, messaging, mqtt, services, devices, users, triggers, roles, database, cache, lock, http, files, deployments, secrets, adapters, buffer, missing];

/** An area's part of the prelude: its code, or the names that compile it on first use. */
const areaJs = (a: PreludeArea) => (a.lazy ? `lazyArea(${JSON.stringify(a.lazy)}, ${JSON.stringify(a.js)});` : a.js);

/** Evaluated in every sandbox before the libraries and the service. */
export const PRELUDE = `(function () {\n${CORE_JS}\n${AREAS.map(areaJs).join("\n")}\n})();`;
