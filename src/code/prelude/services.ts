// Services calling services: ClearBlade.Code().execute and ClearBladeAsync.Code().execute, and the
// system's service names (getAllServices).
import type { PreludeArea } from "./area.ts";

const js = String.raw`
  ClearBlade.Code = function () {
    return {
      execute: function (name, params, loggingEnabled, cb) { if (typeof loggingEnabled === "function") cb = loggingEnabled; return classic("code.execute", { name: name, params: params || {} }, cb); },
      getAllServices: function (cb) { return classic("code.names", null, cb); },
    };
  };
  ClearBladeAsync.Code = function () {
    return { execute: function (n, p) { return call("code.execute", { name: n, params: p || {} }); }, getAllServices: function () { return call("code.names", null); } };
  };
`;

export const services: PreludeArea = { js: js };
