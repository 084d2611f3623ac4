// Files from code: ClearBladeAsync.FS(set) and File(set, path) on a bucket set (paths start with
// the box: "outbox/report.csv"), and ClearBladeAsync.FileStore(name). Through the bucket set and
// file store domains with the run's user's rights (role permissions files and filestorefiles);
// bytes cross the sandbox as percent-escaped latin1 text (as http.ts does), strings as they are.
import { fail } from "../../core/errors.ts";
import type { FileAccess } from "../../domain/fileStores.ts";
import { LEVEL } from "../../auth/permissions.ts";
import type { HostContext, LibraryArea } from "./types.ts";

const escaped = (bytes: Uint8Array) => escape(Buffer.from(bytes).toString("latin1"));

/** The bytes a write sent: {escaped} bytes, or {text} (stored as UTF-8). */
function bytesOf(a: Record<string, unknown>): Uint8Array {
  if (typeof a.text === "string") return new TextEncoder().encode(a.text);
  const latin1 = typeof a.escaped === "string" ? unescape(a.escaped) : "";
  if (typeof a.escaped !== "string" || /[^\x00-\xff]/.test(latin1)) throw fail("INVALID_ARGUMENT", "the data must be a string or a Uint8Array");
  return new Uint8Array(Buffer.from(latin1, "latin1"));
}

const set = (x: HostContext, a: Record<string, unknown>, level: number) => x.e.bucketSets.open(x.p, x.systemKey, String(a.set ?? ""), level);
const store = (x: HostContext, a: Record<string, unknown>, access: FileAccess, path?: unknown) =>
  x.e.fileStores.openFor(x.p, x.systemKey, String(a.store ?? ""), access, typeof path === "string" ? path : undefined);

export const files: LibraryArea = {
  ops: {
    "fs.readDir": async (x, a) => {
      const { files } = await set(x, a, LEVEL.READ);
      const out: string[] = [];
      let continuation = "";
      do {
        const page = await files.list({ prefix: a.path ? x.e.bucketSets.fsPath(a.path) : "", depth: -1, limit: 1000, continuation });
        for (const e of page.entries) if (!e.isDir) out.push(e.path);
        continuation = page.continuation;
      } while (continuation);
      return out;
    },
    "fs.readFile": async (x, a) => ({ escaped: escaped(await (await set(x, a, LEVEL.READ)).files.get(x.e.bucketSets.fsPath(a.path))) }),
    // each write says so (edge sync sends what an edge writes to its outbox)
    "fs.writeFile": async (x, a) => {
      const { set: s, files } = await set(x, a, LEVEL.CREATE);
      const path = x.e.bucketSets.fsPath(a.path);
      await files.put(path, bytesOf(a), { maxBytes: x.e.fileStores.maxFileBytes });
      x.e.bucketSets.changed(s.system_key, s.name, path, false);
      return null;
    },
    "fs.copyFile": async (x, a) => {
      const { set: s, files } = await set(x, a, LEVEL.READ | LEVEL.CREATE);
      const to = x.e.bucketSets.fsPath(a.to);
      await files.copy(x.e.bucketSets.fsPath(a.from), to);
      x.e.bucketSets.changed(s.system_key, s.name, to, false);
      return null;
    },
    "fs.renameFile": async (x, a) => {
      const { set: s, files } = await set(x, a, LEVEL.READ | LEVEL.CREATE | LEVEL.DELETE);
      const from = x.e.bucketSets.fsPath(a.from), to = x.e.bucketSets.fsPath(a.to);
      await files.move(from, to);
      x.e.bucketSets.changed(s.system_key, s.name, from, true);
      x.e.bucketSets.changed(s.system_key, s.name, to, false);
      return null;
    },
    "fs.deleteFile": async (x, a) => {
      const path = x.e.bucketSets.fsPath(a.path);
      const { set: s, files } = await set(x, a, LEVEL.DELETE);
      if (!(await files.delete(path))) throw fail("NOT_FOUND", `file '${path}' does not exist`);
      x.e.bucketSets.changed(s.system_key, s.name, path, true);
      return null;
    },
    "fs.stat": async (x, a) => {
      const path = x.e.bucketSets.fsPath(a.path);
      const st = await (await set(x, a, LEVEL.READ)).files.stat(path);
      if (!st) throw fail("NOT_FOUND", `file '${path}' does not exist`);
      return { size: st.size, permissions: st.isDir ? "drwxrwxrwx" : "-rw-rw-rw-", isDir: st.isDir, last_modified: st.modified.toISOString() };
    },
    "fs.syncFileToEdge": async (x, a) => {
      await x.e.bucketSets.sendToEdge(x.p, x.systemKey, String(a.set ?? ""), x.e.bucketSets.fsPath(a.path), String(a.edge ?? ""));
      return null;
    },
    "filestore.read": async (x, a) => ({ escaped: escaped(await (await store(x, a, "read", a.path)).get(String(a.path ?? ""))) }),
    "filestore.write": async (x, a) => { await x.e.fileStores.write(await store(x, a, "write", a.path), String(a.path ?? ""), bytesOf(a)); return null; },
    "filestore.delete": async (x, a) => x.e.fileStores.removeFile(await store(x, a, "delete", a.path), String(a.path ?? "")).then(() => null),
    "filestore.copy": async (x, a) => { await (await store(x, a, "write", a.from)).copy(String(a.from ?? ""), String(a.to ?? "")); return null; },
    "filestore.move": async (x, a) => { await (await store(x, a, "move", a.from)).move(String(a.from ?? ""), String(a.to ?? "")); return null; },
    "filestore.list": async (x, a) => x.e.fileStores.listFiles(await store(x, a, "read"), {
      prefix: typeof a.prefix === "string" ? a.prefix : "", depth: typeof a.depth === "number" ? a.depth : 1,
      limit: typeof a.limit === "number" ? a.limit : 100, continuation: typeof a.continuation_token === "string" ? a.continuation_token : "",
    }),
  },
};
