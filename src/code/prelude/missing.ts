// What ClearBlade's libraries have and this runtime does not provide: each fails naming itself
// (an absent function would fail with only "not a function"). Methods of provided objects that
// are missing are stubbed in their own areas the same way (notProvided, in the core).
import type { PreludeArea } from "./area.ts";

const js = String.raw`
  ClearBladeAsync.Edges = notProvided("ClearBladeAsync.Edges() (edges are managed over the API: /admin/edges)");
  ClearBladeAsync.DevicePublicKeys = notProvided("ClearBladeAsync.DevicePublicKeys()");
  ClearBladeAsync.CustomSync = notProvided("ClearBladeAsync.CustomSync() (an edge syncs the collections its deployments name)");
  // services ClearBlade hosts itself
  ClearBladeAsync.GoogleCloudLogger = notProvided("ClearBladeAsync.GoogleCloudLogger()");
  ClearBladeAsync.GoogleCloudMonitoring = notProvided("ClearBladeAsync.GoogleCloudMonitoring()");
  ClearBladeAsync.DataUsage = notProvided("ClearBladeAsync.DataUsage()");
`;

export const missing: PreludeArea = { js: js };
