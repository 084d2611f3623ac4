// ClearBlade's small helpers (about, execute, logger, isObjectEmpty, makeKVPair,
// validateEmailPassword), and what its libraries have and this runtime does not provide: each of
// those fails naming itself (an absent function would fail with only "not a function"). Methods
// of provided objects that are missing are stubbed in their own areas the same way (notProvided,
// in the core).
import type { PreludeArea } from "./area.ts";

const js = String.raw`
  ClearBlade.about = function () { return "ClearBlade code service library (Outpost)"; };
  ClearBlade.execute = function (error, response, callback) { if (typeof callback === "function") callback(error, response); };
  ClearBlade.logger = function (message) { log(message); };
  ClearBlade.isObjectEmpty = function (o) { if (typeof o !== "object" || o === null) return true; for (var k in o) return false; return true; };
  ClearBlade.makeKVPair = function (key, value) { var kv = {}; kv[key] = value; return kv; };
  ClearBlade.validateEmailPassword = function (email, password) {
    if (typeof email !== "string") throw new Error("Email must be given and must be a string");
    if (typeof password !== "string") throw new Error("Password must be given and must be a string");
  };
  ClearBlade.Item = notProvided("ClearBlade.Item() (read and write rows through ClearBlade.Collection)");
  ClearBlade.http = notProvided("ClearBlade.http() (use Requests() or fetch)");
  ClearBladeAsync.Edges = notProvided("ClearBladeAsync.Edges() (edges are managed over the API: /admin/edges)");
  ClearBladeAsync.DevicePublicKeys = notProvided("ClearBladeAsync.DevicePublicKeys()");
  ClearBladeAsync.CustomSync = notProvided("ClearBladeAsync.CustomSync() (an edge syncs the collections its deployments name)");
  // services ClearBlade hosts itself
  ClearBladeAsync.GoogleCloudLogger = notProvided("ClearBladeAsync.GoogleCloudLogger()");
  ClearBladeAsync.GoogleCloudMonitoring = notProvided("ClearBladeAsync.GoogleCloudMonitoring()");
  ClearBladeAsync.DataUsage = notProvided("ClearBladeAsync.DataUsage()");
`;

export const missing: PreludeArea = { js: js };
