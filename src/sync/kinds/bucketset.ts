// Bucket set definitions: an edge gets the set (its name and its edge storage), not the platform's
// storage settings; the files themselves move through file sync (src/sync/files.ts).
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
};
