// Adapters: their settings and files (the files' contents travel in the body, checked against
// their hashes).
import { adapterFilesRepo, adaptersRepo, blobsRepo } from "../../store/adapters.ts";
import { adapterBody, type AdapterBody, decodeBase64, fileContentProblem } from "../../domain/adapters.ts";
import { byName, type DefinitionKind } from "./kind.ts";

export const adapter: DefinitionKind<Awaited<ReturnType<typeof adaptersRepo.list>>[number]> = {
  type: "adapter",
  list: (ex, sk) => adaptersRepo.list(ex, sk), nameOf: (a) => a.name, body: (ex, _sk, a) => adapterBody(ex, a),
  apply: async (ex, sk, _n, { adapter: a, files }: AdapterBody) => {
    await adaptersRepo.put(ex, { ...a, system_key: sk });
    for (const f of files) {
      // a content that is not what its hash says would stay under that hash for every file that has it
      const problem = fileContentProblem(a.name, f);
      if (problem) throw new Error(problem);
      await blobsRepo.put(ex, f.hash, decodeBase64(f.content)!);
    }
    // an edge keeps the current version of each file
    await adapterFilesRepo.replaceAll(ex, sk, a.name, files.map(({ content: _c, ...f }) => ({ ...f, system_key: sk })));
    await blobsRepo.collect(ex);
  },
  remove: async (ex, sk, name) => { await adaptersRepo.delete(ex, sk, name); await blobsRepo.collect(ex); },
  deleteBody: (_ex, _sk, name) => byName(name), stale: [],
};
