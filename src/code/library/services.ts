// Services calling services: ClearBlade.Code().execute and ClearBladeAsync.Code().execute, and the
// system's service names (getAllServices).
import { fail } from "../../core/errors.ts";
import type { LibraryArea } from "./types.ts";

/** How deep services may call each other. */
export const CALL_DEPTH_MAX = 10;

export const services: LibraryArea = {
  ops: {
    "code.execute": async (x, a) => {
      if (typeof a.name !== "string") throw fail("INVALID_ARGUMENT", "a service name is required");
      if (x.depth > CALL_DEPTH_MAX) throw fail("INVALID_ARGUMENT", "services call each other too deeply");
      const r = await x.execute(x.p, x.systemKey, a.name, a.params, { depth: x.depth + 1 });
      if (!r.success) throw fail("INVALID_ARGUMENT", typeof r.results === "string" ? r.results : JSON.stringify(r.results));
      return r.results;
    },
    // the names of the system's services, with the REST list's rights (read on services)
    "code.names": async (x) => (await x.e.services.names(x.p, x.systemKey)).code,
  },
};
