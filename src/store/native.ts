// The libsql native addon inside the compiled binary. Bun would write an embedded .node file to
// $TMPDIR (read once at start) and load it from there, which fails on a gateway whose /tmp is
// mounted noexec, with a stack trace. The build (scripts/build.ts) routes libsql's require of its
// addon here instead: the addon is written to the first directory it loads from, $TMPDIR and then
// the data directory. Running from source (bun test, bun src/main.ts), libsql loads its addon
// from node_modules and nothing here runs.
import { closeSync, constants, fchmodSync, fstatSync, lstatSync, mkdirSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { refuse } from "../core/errors.ts";

let fallback: string | undefined;

/** Where the addon goes when $TMPDIR cannot load it (the data directory's `native`). */
export function nativeFallbackDir(dir: string) { fallback = dir; }

/** A directory of our own: made 0700 when missing; one that is a link, or that another user owns
 *  or may write to, is not used (anyone could swap the addon in it for code of theirs). */
function ownDir(dir: string): string | null {
  try { mkdirSync(dir, { recursive: true, mode: 0o700 }); } catch { return null; }
  const st = lstatSync(dir);
  const uid = process.getuid?.() ?? 0;
  if (!st.isDirectory() || st.uid !== uid || (st.mode & 0o022) !== 0) return null;
  return dir;
}

/** Writes the addon under `dir` (once per content: a later start reuses it) and loads it. */
function loadFrom(dir: string, addon: EmbeddedAddon, name: string): unknown {
  const file = join(dir, name);
  let present = false;
  try { present = statSync(file).size === addon.size; } catch { /* not there yet */ }
  if (!present) {
    const bytes = addon.bytes();
    // written beside and renamed: a start that dies halfway leaves no torn addon under the name
    const part = `${file}.${process.pid}.part`;
    const fd = openSync(part, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o700);
    try {
      writeInPages(fd, bytes);
      fchmodSync(fd, 0o700);
      if (!fstatSync(fd).isFile()) throw new Error(`${part} is not a regular file`);
    } finally { closeSync(fd); }
    renameSync(part, file);
  }
  const m = { exports: {} as unknown };
  try {
    process.dlopen(m as { exports: object }, file);
  } catch (e) {
    // noexec: the file is no use there and would only take space
    if (!present) try { unlinkSync(file); } catch { /* gone already */ }
    throw e;
  }
  return m.exports;
}

/** Writes `bytes` to `fd` 4 KB at a time. Linux (6.x, on ext4 and others) caches a file written in
 *  large pieces in large folios and maps those whole, 2 MB at a time, into a process that runs it;
 *  written page by page, the file is cached as one read from the disk is, and only the code that
 *  runs is resident (an idle edge: 4.8 MB of this addon, not 8.3; the binary itself, which
 *  scripts/build.ts writes the same way, 4 MB less). */
export function writeInPages(fd: number, bytes: Uint8Array) {
  for (let off = 0; off < bytes.length;) off += writeSync(fd, bytes, off, Math.min(4096, bytes.length - off));
}

/** The addon as the binary carries it: zstd-compressed, decompressed only when it is written out. */
interface EmbeddedAddon { size: number; bytes(): Buffer }

/** The addon's exports, for libsql (the build's replacement for its `require` of the addon).
 *  `embedded` is the path inside the binary of the addon compressed with zstd; `size` and `hash`
 *  (Bun.hash, hex) are those of the addon itself. */
export function loadLibsqlAddon(embedded: string, size: number, hash: string): unknown {
  let bytes: Buffer | undefined;
  const addon: EmbeddedAddon = {
    size,
    bytes() {
      if (!bytes) {
        bytes = Buffer.from(Bun.zstdDecompressSync(readFileSync(embedded)));
        if (bytes.length !== size || Bun.hash(bytes).toString(16) !== hash) throw new Error("the embedded database engine (libsql addon) is damaged: the binary is corrupt");
      }
      return bytes;
    },
  };
  const name = `outpost-libsql-${hash}.node`;
  const uid = process.getuid?.() ?? 0;
  // $TMPDIR is often shared (/tmp): a directory of this user's own in it
  const dirs = [join(tmpdir(), `outpost-${uid}`), ...(fallback ? [fallback] : [])];
  const tried: string[] = [];
  for (const d of dirs) {
    const dir = ownDir(d);
    if (!dir) { tried.push(`${d}: not a directory of this user's own, or writable by others`); continue; }
    try { return loadFrom(dir, addon, name); }
    catch (e) { tried.push(`${d}: ${(e as Error).message}`); }
  }
  throw refuse(`cannot load the database engine (libsql native addon) from any of: ${tried.join("; ")}. ` +
    "Set TMPDIR to a writable directory on a filesystem mounted without noexec, or make the data directory one (--data-dir)");
}
