// Services calling services: ClearBlade.Code().execute and ClearBladeAsync.Code().execute.
import { fail } from "../../core/errors.ts";
import type { LibraryArea } from "./types.ts";

/** How deep services may call each other. */
export const CALL_DEPTH_MAX = 10;

const js = String.raw`
  ClearBlade.Code = function () {
    return { execute: function (name, params, loggingEnabled, cb) { if (typeof loggingEnabled === "function") cb = loggingEnabled; return classic("code.execute", { name: name, params: params || {} }, cb); } };
  };
  ClearBladeAsync.Code = function () { return { execute: function (n, p) { return call("code.execute", { name: n, params: p || {} }); } }; };
`;

export const services: LibraryArea = {
  js,
  ops: {
    "code.execute": async (x, a) => {
      if (typeof a.name !== "string") throw fail("INVALID_ARGUMENT", "a service name is required");
      if (x.depth > CALL_DEPTH_MAX) throw fail("INVALID_ARGUMENT", "services call each other too deeply");
      const r = await x.execute(x.p, x.systemKey, a.name, a.params, { depth: x.depth + 1 });
      if (!r.success) throw fail("INVALID_ARGUMENT", typeof r.results === "string" ? r.results : JSON.stringify(r.results));
      return r.results;
    },
  },
};
