// Adapters from code: ClearBladeAsync.Adapters() (create, list, read, update, delete) and
// ClearBladeAsync.Adapter(name) (its meta, its files, control on edges), through the adapters
// domain with the rights its REST routes need (the system's developer). File contents cross as
// base64, as the REST API carries them; the prelude turns them into text or bytes.
import { fail } from "../../core/errors.ts";
import type { LibraryArea } from "./types.ts";

const text = (v: unknown, what: string): string => {
  if (typeof v !== "string" || !v) throw fail("INVALID_ARGUMENT", `${what} is required`);
  return v;
};
const nameOf = (a: Record<string, any>) => text(a.name, "an adapter's name");
const fileOf = (a: Record<string, any>) => text(a.file, "a file's name");

export const adapters: LibraryArea = {
  ops: {
    "adapters.list": (x) => x.e.adapters.list(x.p, x.systemKey),
    "adapters.read": (x, a) => x.e.adapters.get(x.p, x.systemKey, nameOf(a)),
    "adapters.create": (x, a) => x.e.adapters.create(x.p, x.systemKey, a.options),
    "adapters.update": (x, a) => x.e.adapters.update(x.p, x.systemKey, nameOf(a), a.changes),
    "adapters.delete": async (x, a) => { await x.e.adapters.remove(x.p, x.systemKey, nameOf(a)); return null; },
    // the current version of each file, without contents
    "adapters.listFiles": async (x, a) =>
      (await x.e.adapters.files(x.p, x.systemKey, nameOf(a))).filter((f) => f.current).map(({ current: _, ...f }) => f),
    "adapters.createFile": async (x, a) => { await x.e.adapters.putFile(x.p, x.systemKey, nameOf(a), a.options); return null; },
    "adapters.readFile": (x, a) => x.e.adapters.getFile(x.p, x.systemKey, nameOf(a), fileOf(a)),
    "adapters.updateFile": (x, a) => x.e.adapters.overwriteFile(x.p, x.systemKey, nameOf(a), fileOf(a), a.changes),
    "adapters.deleteFile": async (x, a) => { await x.e.adapters.deleteFile(x.p, x.systemKey, nameOf(a), fileOf(a)); return null; },
    // {edge: {err, command, output}} for each edge named
    "adapters.control": (x, a) => x.e.adapters.control(x.p, x.systemKey, nameOf(a), { command: a.command, edges: a.edges }),
  },
};
