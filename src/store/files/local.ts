// File bytes in a local directory (an edge's files, a single platform's). A path never leaves the
// root: '..' and absolute paths are refused by checkPath, and a path whose real location (symbolic
// links resolved) lies outside the root is refused too; listings skip symbolic links. A write goes
// to a hidden part file beside its target and is renamed over it, so a reader never sees half a
// file; a directory left empty by a delete or a move is removed, as object storage has no empty
// directories either.
import { randomBytes } from "node:crypto";
import { copyFile, link, lstat, mkdir, open, readdir, realpath, rename, rm, rmdir, stat, unlink } from "node:fs/promises";
import { dirname, join, sep } from "node:path";
import { fail } from "../../core/errors.ts";
import {
  checkListOptions, checkPath, compareKeys, continuationAfter, dirPrefix, type FileBackend, type FileBody, type FileStat,
  limited, type ListOptions, type ListPage, missing, type PutOptions, skipAfter, sortKey,
} from "./backend.ts";

/** Part files being written: never listed. */
const PART = ".outpost-part-";

const code = (e: unknown) => (e as NodeJS.ErrnoException | undefined)?.code;

/** A file-system failure as an API error: a full disk, a path that crosses a file. */
function fsFailure(e: unknown, path: string): unknown {
  switch (code(e)) {
    case "ENOSPC": case "EDQUOT": return fail("STORAGE_FULL", "the disk under the file storage is full");
    case "ENOTDIR": case "EEXIST": return fail("INVALID_ARGUMENT", `'${path}': a file lies where a directory would be`);
    case "EISDIR": return fail("INVALID_ARGUMENT", `'${path}' is a directory`);
    default: return e;
  }
}

export class LocalFiles implements FileBackend {
  readonly kind = "local" as const;
  private realRoot?: string;

  constructor(readonly root: string) {}

  private async rootDir(): Promise<string> {
    if (!this.realRoot) {
      await mkdir(this.root, { recursive: true, mode: 0o700 });
      this.realRoot = await realpath(this.root);
    }
    return this.realRoot;
  }

  /** The file-system path of a checked key, refused if its real location is outside the root. */
  private async resolve(path: string, what = "path"): Promise<string> {
    const root = await this.rootDir();
    const full = join(root, checkPath(path, what));
    // the deepest part that exists decides: below it nothing can be a link yet
    for (let p = full; ; p = dirname(p)) {
      let real: string;
      try { real = await realpath(p); } catch (e) { if (code(e) === "ENOENT" || code(e) === "ENOTDIR") continue; throw e; }
      if (real !== root && !real.startsWith(root + sep)) throw fail("INVALID_ARGUMENT", `${what} '${path}' leads outside the storage directory`);
      return full;
    }
  }

  /** Removes the directories a removal left empty, up to the root. */
  private async prune(full: string) {
    const root = await this.rootDir();
    for (let d = dirname(full); d !== root && d.startsWith(root + sep); d = dirname(d)) {
      try { await rmdir(d); } catch { return; }
    }
  }

  private async fileAt(path: string): Promise<string> {
    const full = await this.resolve(path);
    let st: Awaited<ReturnType<typeof stat>>;
    try { st = await stat(full); } catch (e) { if (code(e) === "ENOENT" || code(e) === "ENOTDIR") throw missing(path); throw e; }
    if (!st.isFile()) throw missing(path);
    return full;
  }

  async put(path: string, body: FileBody, opts: PutOptions = {}): Promise<FileStat> {
    const full = await this.resolve(path);
    const data = limited(body, opts.maxBytes);
    const part = join(dirname(full), `${PART}${randomBytes(6).toString("hex")}`);
    try {
      await mkdir(dirname(full), { recursive: true, mode: 0o700 });
      if (data instanceof Uint8Array) await Bun.write(part, data);
      else await Bun.write(part, new Response(data));
      await rename(part, full);
    } catch (e) {
      await unlink(part).catch(() => {});
      await this.prune(part);
      throw fsFailure(e, path);
    }
    return (await this.stat(path))!;
  }

  async adopt(path: string, localFile: string): Promise<boolean> {
    const full = await this.resolve(path);
    await mkdir(dirname(full), { recursive: true, mode: 0o700 });
    try { await rename(localFile, full); } catch (e) { if (code(e) === "EXDEV") return false; throw fsFailure(e, path); }
    // the rename itself on disk: a file adopted is one whose sender may drop its own copy
    const dir = await open(dirname(full), "r");
    try { await dir.sync(); } finally { await dir.close(); }
    return true;
  }

  async linkOut(path: string, localFile: string): Promise<boolean> {
    const full = await this.fileAt(path);
    try { await link(full, localFile); return true; } catch (e) { if (code(e) === "EXDEV" || code(e) === "EPERM") return false; throw fsFailure(e, path); }
  }

  async get(path: string, range?: { start: number; end?: number }): Promise<Uint8Array> {
    const file = Bun.file(await this.fileAt(path));
    return range ? file.slice(range.start, range.end).bytes() : file.bytes();
  }

  async stream(path: string, start = 0): Promise<ReadableStream<Uint8Array>> {
    const file = Bun.file(await this.fileAt(path));
    return (start ? file.slice(start) : file).stream();
  }

  async stat(path: string): Promise<FileStat | null> {
    const full = await this.resolve(path);
    try {
      const st = await stat(full);
      if (!st.isFile() && !st.isDirectory()) return null;
      return { path, size: st.isFile() ? st.size : 0, modified: st.mtime, isDir: st.isDirectory() };
    } catch (e) {
      if (code(e) === "ENOENT" || code(e) === "ENOTDIR") return null;
      throw e;
    }
  }

  async list(opts?: ListOptions): Promise<ListPage> {
    const { prefix, depth, limit, after } = checkListOptions(opts);
    const base = prefix ? await this.resolve(prefix.slice(0, -1), "prefix") : await this.rootDir();
    const entries: FileStat[] = [];
    // true once an entry beyond the page was seen
    const walk = async (dirKey: string, dirPath: string, level: number): Promise<boolean> => {
      let names: { name: string; isDir: boolean; full: string }[] = [];
      try {
        for (const d of await readdir(dirPath, { withFileTypes: true })) {
          if (d.name.startsWith(PART) || (!d.isFile() && !d.isDirectory())) continue; // links, sockets, part files
          names.push({ name: d.name, isDir: d.isDirectory(), full: join(dirPath, d.name) });
        }
      } catch (e) {
        if (code(e) === "ENOENT" || code(e) === "ENOTDIR") return false;
        throw e;
      }
      names = names.sort((a, b) => compareKeys(a.isDir ? `${a.name}/` : a.name, b.isDir ? `${b.name}/` : b.name));
      for (const n of names) {
        const key = dirKey + n.name, sk = n.isDir ? `${key}/` : key;
        const skip = skipAfter(sk, after, prefix, depth);
        if (!skip) {
          if (entries.length === limit) return true;
          const st = await stat(n.full).catch(() => null);
          if (!st) continue;
          entries.push({ path: key, size: n.isDir ? 0 : st.size, modified: st.mtime, isDir: n.isDir });
        }
        // a directory wholly before the token was listed on an earlier page
        if (n.isDir && level < depth && (!skip || after.startsWith(sk)) && (await walk(sk, n.full, level + 1))) return true;
      }
      return false;
    };
    const more = await walk(prefix, base, 1);
    return { entries, continuation: more ? continuationAfter(sortKey(entries.at(-1)!)) : "" };
  }

  async copy(from: string, to: string): Promise<void> {
    const src = await this.fileAt(from);
    const dst = await this.resolve(to, "destination");
    const part = join(dirname(dst), `${PART}${randomBytes(6).toString("hex")}`);
    try {
      await mkdir(dirname(dst), { recursive: true, mode: 0o700 });
      await copyFile(src, part);
      await rename(part, dst);
    } catch (e) {
      await unlink(part).catch(() => {});
      await this.prune(part);
      throw await this.sourceGone(e, from, src) ?? fsFailure(e, to);
    }
  }

  /** A copy or move that failed because its source went away meanwhile (a concurrent move or
   *  delete of the same file): the file is missing, not a server failure. */
  private async sourceGone(e: unknown, from: string, src: string): Promise<unknown> {
    if (code(e) !== "ENOENT") return null;
    return (await stat(src).then((st) => st.isFile(), () => false)) ? null : missing(from);
  }

  async move(from: string, to: string): Promise<void> {
    const src = await this.fileAt(from);
    const dst = await this.resolve(to, "destination");
    if (src === dst) return;
    try {
      await mkdir(dirname(dst), { recursive: true, mode: 0o700 });
      await rename(src, dst);
    } catch (e) {
      throw await this.sourceGone(e, from, src) ?? fsFailure(e, to);
    }
    await this.prune(src);
  }

  async delete(path: string): Promise<boolean> {
    const full = await this.resolve(path);
    try {
      if (!(await lstat(full)).isFile()) return false;
      await unlink(full);
    } catch (e) {
      if (code(e) === "ENOENT" || code(e) === "ENOTDIR") return false;
      throw e;
    }
    await this.prune(full);
    return true;
  }

  async deleteAll(prefix: string): Promise<number> {
    const p = dirPrefix(prefix);
    const dir = p ? await this.resolve(p.slice(0, -1), "prefix") : await this.rootDir();
    let n = 0;
    const count = async (d: string) => {
      for (const e of await readdir(d, { withFileTypes: true }).catch(() => [])) {
        if (e.isFile() && !e.name.startsWith(PART)) n++;
        else if (e.isDirectory()) await count(join(d, e.name));
      }
    };
    await count(dir);
    if (p) {
      if ((await lstat(dir).catch(() => null))?.isDirectory()) {
        await rm(dir, { recursive: true, force: true });
        await this.prune(dir);
      }
    } else {
      for (const e of await readdir(dir)) await rm(join(dir, e), { recursive: true, force: true });
    }
    return n;
  }
}
