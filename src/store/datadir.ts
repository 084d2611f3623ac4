// The data directory: one instance at a time, and readable by that instance alone.
// The lock is an SQLite EXCLUSIVE lock on <data-dir>/outpost.lock, held by a connection kept open
// for the life of the process. SQLite takes it as a POSIX record lock, which the kernel drops
// when the process ends however it ends (kill -9 included), so no stale lock is ever left to
// clean up; the engine is already in the binary, and Bun has no flock of its own.
import { chmodSync, chownSync, closeSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { refuse } from "../core/errors.ts";

export interface DataDirLock { path: string; release(): void }

/** The data directory made (0700) or narrowed: 0700, or 0711 as the adapter runner leaves it
 *  when the adapters directory lies inside (passable, not listable); files directly in it
 *  (database, secret key) lose any group and other bits. */
export function prepareDataDir(dir: string) {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const mode = statSync(dir).mode & 0o777;
  if (mode !== 0o700 && mode !== 0o711) chmodSync(dir, 0o700);
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const st = lstatSync(p);
    if (st.isFile() && st.mode & 0o077) chmodSync(p, st.mode & 0o700);
  }
}

/** A file made by root in a data directory another user owns (a backup restored with sudo, the
 *  lock of such a run) goes to that user: the service must still open it. */
export function ownLikeDir(path: string, dir: string) {
  if (process.getuid?.() !== 0) return;
  const d = statSync(dir);
  const f = lstatSync(path);
  if (f.uid !== d.uid || f.gid !== d.gid) chownSync(path, d.uid, d.gid);
}

/** Takes the data directory for this process, or refuses naming the process that holds it;
 *  `hint` says what to do then. */
export async function lockDataDir(dir: string, hint = "one instance per data directory: stop that one first, or give this one another --data-dir"): Promise<DataDirLock> {
  prepareDataDir(dir);
  const path = join(dir, "outpost.lock");
  closeSync(openSync(path, "a", 0o600));
  ownLikeDir(path, dir);
  const { default: Database } = await import("libsql");
  const conn = new Database(path, { timeout: 0 });
  try {
    conn.exec("PRAGMA locking_mode=EXCLUSIVE");
    conn.exec("PRAGMA journal_mode=MEMORY"); // nothing is written: no journal file beside it
    conn.exec("BEGIN EXCLUSIVE");
  } catch (e) {
    conn.close();
    if (!/SQLITE_BUSY|database is locked/i.test(`${(e as { code?: string }).code} ${(e as Error).message}`)) throw e;
    throw refuse(`the data directory ${dir} is in use by ${holder(path)}: ${hint}`);
  }
  const lock: DataDirLock = {
    path,
    release: () => {
      held.delete(lock);
      try { conn.exec("ROLLBACK"); } catch { /* never began */ }
      conn.close();
    },
  };
  held.add(lock);
  return lock;
}

/** Locks taken: referenced here so a collected connection can never let its lock go. */
const held = new Set<DataDirLock>();

/** The process holding a lock on `path`, from the kernel's table of locks. */
function holder(path: string): string {
  try {
    const ino = statSync(path).ino;
    for (const line of readFileSync("/proc/locks", "utf8").split("\n")) {
      // 1: POSIX  ADVISORY  WRITE 4242 fd:01:1311003 1073741824 1073741825 (waiters show "->")
      const m = /^\d+:\s+(?!->)\S+\s+\S+\s+\S+\s+(\d+)\s+[0-9a-f]+:[0-9a-f]+:(\d+)\s/.exec(line);
      if (!m || Number(m[2]) !== ino || m[1] === "0") continue;
      let name = "";
      try { name = readFileSync(`/proc/${m[1]}/comm`, "utf8").trim(); } catch { /* gone, or not ours to see */ }
      return `process ${m[1]}${name ? ` (${name})` : ""}`;
    }
  } catch { /* no /proc */ }
  return "another process";
}
