// Bucket set definitions: an edge gets the set (its name and its edge storage), not the platform's
// storage settings; the files themselves move through file sync (src/sync/files.ts). An S3 edge
// storage's secret travels opened on the link and is sealed with the edge's own key on arrival.
import { arrivedConfig, travellingConfig } from "../../domain/fileStorage.ts";
import { type BucketSetRow, bucketSetsRepo } from "../../store/fileAreas.ts";
import { syncedBucketSetsRepo } from "../../store/fileTransfers.ts";
import { byName, type DefinitionKind } from "./kind.ts";

export const bucketset: DefinitionKind<BucketSetRow> = {
  type: "bucketset",
  list: (ex, sk) => bucketSetsRepo.list(ex, sk), nameOf: (r) => r.name,
  body: (_ex, _sk, r) => ({ ...r, platform_config: "{}" }),
  apply: (ex, sk, _n, b: BucketSetRow) => syncedBucketSetsRepo.put(ex, { ...b, system_key: sk }),
  remove: (ex, sk, name) => bucketSetsRepo.delete(ex, sk, name),
  deleteBody: (_ex, _sk, name) => byName(name), stale: [],
  wire: {
    // (a change's body is the row as created: the platform's settings are left out here too)
    out: (b: BucketSetRow, box) => ({ ...b, platform_config: "{}", edge_config: travellingConfig(b.edge_config, box) }),
    in: (b: BucketSetRow, box) => ({ ...b, edge_config: arrivedConfig(b.edge_config, box) }),
  },
};
