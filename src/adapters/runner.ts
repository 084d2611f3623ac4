// Edge side of adapter control: files written under the adapters directory, never
// outside it and never through a symbolic link; permissions and owners set; the adapter's mapped
// command run in its directory with a time limit and a clean environment, as an unprivileged user
// when the edge runs as root, its output returned. The edge's data directory (database, secret
// key) stays out of the commands' reach.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, closeSync, constants, fchmodSync, fchownSync, fstatSync, lchownSync, lstatSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, readlinkSync, realpathSync, renameSync, rmSync, type Stats, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, isAbsolute, join, normalize, relative, resolve, sep } from "node:path";
import { fail } from "../core/errors.ts";

export const CONTROL_COMMANDS = ["deploy", "start", "stop", "restart", "status", "logs", "undeploy"] as const;
export type ControlCommand = (typeof CONTROL_COMMANDS)[number];

/** An adapter as the control message carries it. */
export interface ControlAdapter {
  name: string;
  deploy_command: string; start_command: string; stop_command: string; status_command: string; undeploy_command: string; logs_command: string;
  run_stop_on_deploy: number; run_start_on_deploy: number; run_deploy_on_deploy: number;
}
export interface ControlFile { name: string; path_name: string; owner: string; group: string; permissions: string; version: number; content: string }
export interface ControlResult { err: boolean; command: string; output: string }

export interface RunnerOptions {
  /** who commands run as when the edge runs as root: a user name or a uid (nobody) */
  user?: string;
  /** the edge's data directory, kept from the commands */
  dataDir?: string;
}

/** Most output bytes kept from one command. */
export const OUTPUT_MAX = 64 * 1024;

/** How a command went: its exit code (null: killed), whether its time ran out, its output (at
 *  most OUTPUT_MAX bytes, `truncated` past them). */
export interface CommandRun { code: number | null; timedOut: boolean; output: string; truncated: boolean }
const NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
/** Longest path_name, and longest part of one (what file systems take). */
const PATH_MAX = 1024, PART_MAX = 255;
const DEFAULT_USER = "nobody";
const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** A file's relative path, normalised; null when it is absolute, climbs out with `..` or names
 *  the directory itself. */
export function safeRelativePath(p: string): string | null {
  if (!p || p.length > PATH_MAX || p.includes("\0") || isAbsolute(p) || /^[A-Za-z]:/.test(p) || p.startsWith("\\")) return null;
  const n = normalize(p.replace(/\\/g, "/")).replace(/\/+$/, "");
  if (!n || n === "." || n.split("/").some((part) => part === ".." || part.length > PART_MAX)) return null;
  return n;
}

/** Octal permission text ("755", "0644"); null when it is not. */
export function permissionBits(p: string): number | null {
  return /^0?[0-7]{3}$/.test(p) ? parseInt(p, 8) : null;
}

/** A user of this host: ids and home. */
interface Account { uid: number; gid: number; home: string }

/** The line of a name (or a number) in /etc/passwd or /etc/group, split on ':'. Read from the
 *  files rather than through getent, which gateways built on busybox may not have. */
function entryOf(file: string, who: string): string[] | null {
  let text: string;
  try { text = readFileSync(file, "utf8"); } catch { return null; }
  const numeric = /^\d+$/.test(who);
  for (const line of text.split("\n")) {
    const f = line.split(":");
    if (f.length >= 4 && (f[0] === who || (numeric && f[2] === who))) return f;
  }
  return null;
}

/** A user by name or uid; a uid /etc/passwd does not list stands for itself (its gid the same). */
function accountOf(who: string): Account | null {
  const f = entryOf("/etc/passwd", who);
  if (f && f.length >= 6) return { uid: Number(f[2]), gid: Number(f[3]), home: f[5] || "/" };
  return /^\d+$/.test(who) ? { uid: Number(who), gid: Number(who), home: "/" } : null;
}

function groupOf(who: string): number | null {
  const f = entryOf("/etc/group", who);
  return f ? Number(f[2]) : /^\d+$/.test(who) ? Number(who) : null;
}

const lstatOrNull = (p: string): Stats | null => { try { return lstatSync(p); } catch { return null; } };
/** A path as it really is where it exists (the operator may give the directories through links). */
const realOrResolved = (p: string) => { try { return realpathSync(p); } catch { return resolve(p); } };
const within = (dir: string, p: string) => p === dir || p.startsWith(dir + sep);

export class AdapterRunner {
  /** `opts`: who runs the commands and what they must not reach (the edge's configuration). */
  constructor(private readonly root: string, private readonly opts: RunnerOptions = {}) {}

  /** The adapter's directory, inside the root (the name is checked, so it cannot climb out); never
   *  the data directory or one holding it, since undeploy removes an adapter's directory whole. */
  dir(adapter: string): string {
    if (!NAME_RE.test(adapter)) throw fail("INVALID_ARGUMENT", `invalid adapter name '${adapter}'`);
    const dir = join(realOrResolved(this.root), adapter);
    const data = this.opts.dataDir && realOrResolved(this.opts.dataDir);
    if (data && within(dir, data)) throw fail("INVALID_ARGUMENT", `adapter '${adapter}': its directory ${dir} would hold the edge's data directory`);
    return dir;
  }

  deployed(adapter: string) { return !!lstatOrNull(this.dir(adapter))?.isDirectory(); }

  /** Commands run as the configured user when the edge runs as root; otherwise as the edge's own
   *  user (null), which is all a process that is not root can do. */
  private account(): Account | null {
    if (process.getuid?.() !== 0) return null;
    const who = this.opts.user || DEFAULT_USER;
    const a = accountOf(who);
    if (!a) throw fail("INVALID_ARGUMENT", `the adapters user '${who}' does not exist on this edge (--adapters-user)`);
    return a;
  }

  /** The adapters directory, made when missing, passable for the adapters user. */
  private rootDir(who: Account | null) {
    mkdirSync(this.root, { recursive: true, mode: 0o755 });
    const root = realpathSync(this.root);
    if (this.opts.dataDir && root === realOrResolved(this.opts.dataDir))
      throw fail("INVALID_ARGUMENT", "the adapters directory must not be the edge's data directory (--adapters-dir)");
    const st = lstatSync(root);
    if (who && (st.mode & 0o011) !== 0o011) chmodSync(root, st.mode | 0o011);
  }

  /** The adapter's directory: a real directory (a link in its place is refused), made when missing,
   *  owned by the user the commands run as so that an adapter can keep its state beside its files. */
  private home(adapter: string, who: Account | null): string {
    this.rootDir(who);
    const dir = this.dir(adapter);
    const st = lstatOrNull(dir);
    if (!st) mkdirSync(dir, { mode: 0o755 });
    else if (!st.isDirectory()) throw fail("INVALID_ARGUMENT", `adapter '${adapter}': ${dir} is not a directory (a link is never followed)`);
    if (who && st?.uid !== who.uid) lchownSync(dir, who.uid, who.gid);
    return dir;
  }

  /** Keeps the data directory from the adapters user: not listable, and everything in it readable
   *  by the edge alone. The default adapters directory lies inside it (<data-dir>/adapters), so
   *  then it is 0711: passable on the way down to the adapters, but with nothing in it to list
   *  or to open by a known name (outpost.db, secret.key); otherwise it is 0700. */
  private guardDataDir() {
    if (!this.opts.dataDir) return;
    const root = realpathSync(this.root);
    const data = realOrResolved(this.opts.dataDir);
    const st = lstatOrNull(data);
    if (!st?.isDirectory()) return;
    const holdsRoot = root.startsWith(data + sep);
    const mode = holdsRoot ? 0o711 : 0o700;
    if ((st.mode & 0o777) !== mode) chmodSync(data, mode);
    for (const name of readdirSync(data)) {
      const p = join(data, name);
      const e = lstatOrNull(p);
      if (!e || e.isSymbolicLink()) continue;
      if (holdsRoot && within(p, root)) {
        // directories between the data directory and the adapters one: passable only
        for (let d = p; d !== root; d = join(d, relative(d, root).split(sep)[0]!)) {
          const m = lstatSync(d).mode & 0o7777;
          if (m !== 0o711) chmodSync(d, 0o711);
        }
      } else if (e.mode & 0o077) chmodSync(p, e.mode & 0o7700);
    }
  }

  /** Goes down a file's path under the adapter's directory, part by part: each must be a real
   *  directory and the file a regular file. A link is refused, a dangling one too (following it
   *  would write wherever it points). Missing directories are made when `make`. */
  private walk(home: string, rel: string, file: string, who: Account | null, make: boolean): string {
    const parts = rel.split("/");
    let at = home;
    for (let i = 0; i < parts.length; i++) {
      at = join(at, parts[i]!);
      const last = i === parts.length - 1;
      const st = lstatOrNull(at);
      if (!st) {
        if (last || !make) return join(home, rel);
        mkdirSync(at, { mode: 0o755 });
        if (who) lchownSync(at, who.uid, who.gid);
        continue;
      }
      if (st.isSymbolicLink()) throw fail("INVALID_ARGUMENT", `file '${file}': '${relative(home, at)}' is a symbolic link; a deploy never writes through one`);
      if (last ? !st.isFile() : !st.isDirectory()) throw fail("INVALID_ARGUMENT", `file '${file}': '${relative(home, at)}' is not a ${last ? "regular file" : "directory"}`);
    }
    return at;
  }

  /** Owner and group a file gets: the adapters user's unless the file names others (as root only). */
  private ownerOf(f: ControlFile, rel: string, who: Account | null, notes: string[]): [number, number] | null {
    if (!who) return null;
    let uid = who.uid, gid = who.gid;
    if (f.owner) {
      const a = accountOf(f.owner);
      if (a) uid = a.uid; else notes.push(`chown ${f.owner} ${rel}: no such user on this edge`);
    }
    if (f.group) {
      const g = groupOf(f.group);
      if (g !== null) gid = g; else notes.push(`chgrp ${f.group} ${rel}: no such group on this edge`);
    }
    return [uid, gid];
  }

  /** Writes the files; every path is checked before any is written, so a refused deploy writes nothing. */
  writeFiles(adapter: string, files: ControlFile[]): string[] {
    const who = this.account();
    const home = this.home(adapter, who);
    const plan = files.map((f) => {
      const rel = safeRelativePath(f.path_name || f.name);
      if (!rel) throw fail("INVALID_ARGUMENT", `file '${f.name}': path '${f.path_name}' leaves the adapter's directory`);
      this.walk(home, rel, f.name, who, false);
      return { f, rel };
    });
    const notes: string[] = [];
    for (const { f, rel } of plan) {
      const target = this.walk(home, rel, f.name, who, true);
      // written whole beside the file and renamed over it: the adapter (or anyone) reading the
      // file meanwhile sees the old content or the new, never a truncated one, and a program
      // that is running keeps its own copy (writing into it in place fails: text file busy)
      const part = join(dirname(target), `.outpost-deploy-${randomBytes(6).toString("hex")}`);
      const fd = openSync(part, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o600);
      let renamed = false;
      try {
        // an adapter's process may have swapped a directory on the way for a link since the walk:
        // the file opened is checked where it really is before anything is written to it
        let real: string;
        try { real = readlinkSync(`/proc/self/fd/${fd}`); } catch { real = join(realpathSync(dirname(part)), basename(part)); }
        if (!fstatSync(fd).isFile() || !within(home, real)) throw fail("INVALID_ARGUMENT", `file '${f.name}': path '${f.path_name}' leaves the adapter's directory`);
        writeFileSync(fd, Buffer.from(f.content, "base64"));
        const owner = this.ownerOf(f, rel, who, notes);
        if (owner) fchownSync(fd, owner[0], owner[1]);
        // "" (what ClearBlade exports) is the default mode
        const mode = permissionBits(f.permissions);
        fchmodSync(fd, mode ?? 0o644);
        // renamed where it was checked to be
        renameSync(real, join(dirname(real), basename(target)));
        renamed = true;
      } finally {
        closeSync(fd);
        if (!renamed) rmSync(part, { force: true });
      }
    }
    return notes;
  }

  remove(adapter: string) { rmSync(this.dir(adapter), { recursive: true, force: true }); }

  /** Only what a shell needs: nothing of the edge's own environment (its token, its OUTPOST_*
   *  settings) reaches a command. */
  private env(who: Account | null): Record<string, string> {
    const e = process.env;
    return { PATH: e.PATH || DEFAULT_PATH, HOME: who ? who.home : e.HOME || "/", ...(e.LANG ? { LANG: e.LANG } : {}) };
  }

  /** Runs a shell command in the adapter's directory; output goes to a file, so a process the
   *  command leaves running in the background cannot hold the call open. */
  run(adapter: string, command: string, timeoutMs: number): Promise<CommandRun> {
    const who = this.account();
    const cwd = this.home(adapter, who);
    if (who) this.guardDataDir();
    return this.spawnIn(cwd, command, timeoutMs, who);
  }

  /** Runs a command line in the root directory itself (an edge's allowed remote commands), with
   *  the same user, environment, limits and guard of the data directory as adapter commands. */
  exec(command: string, timeoutMs: number): Promise<CommandRun> {
    const who = this.account();
    this.rootDir(who);
    if (who) this.guardDataDir();
    return this.spawnIn(realpathSync(this.root), command, timeoutMs, who);
  }

  private spawnIn(cwd: string, command: string, timeoutMs: number, who: Account | null): Promise<CommandRun> {
    const outDir = mkdtempSync(join(tmpdir(), "outpost-adapter-"));
    const outPath = join(outDir, "out");
    const fd = openSync(outPath, "w");
    return new Promise((res) => {
      const child = spawn("sh", ["-c", command], { cwd, stdio: ["ignore", fd, fd], detached: true, env: this.env(who), ...(who ? { uid: who.uid, gid: who.gid } : {}) });
      closeSync(fd);
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        try { process.kill(-child.pid!, "SIGKILL"); } catch { child.kill("SIGKILL"); }
      }, timeoutMs);
      let done = false;
      const finish = (code: number | null, error?: Error) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        let output = "", truncated = false;
        try {
          const b = readFileSync(outPath);
          truncated = b.length > OUTPUT_MAX;
          output = b.subarray(0, OUTPUT_MAX).toString("utf8") + (truncated ? "\n[output truncated]" : "");
        } catch { /* none */ }
        if (error) output += `${output ? "\n" : ""}${error.message}`;
        rmSync(outDir, { recursive: true, force: true });
        res({ code, timedOut, output, truncated });
      };
      child.once("error", (e) => finish(null, e));
      child.once("exit", (code) => finish(code));
    });
  }

  /** One control command, as the platform asked for it. */
  async control(adapter: ControlAdapter, command: ControlCommand, files: ControlFile[] | undefined, timeoutMs: number): Promise<ControlResult> {
    const out: string[] = [];
    let err = false;
    const step = async (what: string, line: string) => {
      if (!line) { out.push(`[${what}] no ${what} command is set for adapter '${adapter.name}'`); err = true; return; }
      const r = await this.run(adapter.name, line, timeoutMs);
      if (r.output) out.push(r.output.replace(/\n$/, ""));
      if (r.timedOut) { out.push(`[${what}] '${line}' did not finish within ${timeoutMs / 1000} s and was killed`); err = true; }
      else if (r.code !== 0) { out.push(`[${what}] '${line}' exited with ${r.code}`); err = true; }
    };
    try {
      switch (command) {
        case "deploy":
          if (adapter.run_stop_on_deploy && adapter.stop_command && this.deployed(adapter.name)) await step("stop", adapter.stop_command);
          out.push(...this.writeFiles(adapter.name, files ?? []));
          out.push(`[deploy] ${files?.length ?? 0} file(s) written`);
          if (adapter.run_deploy_on_deploy && adapter.deploy_command) await step("deploy", adapter.deploy_command);
          if (!err && adapter.run_start_on_deploy && adapter.start_command) await step("start", adapter.start_command);
          break;
        case "restart":
          await step("stop", adapter.stop_command);
          if (!err) await step("start", adapter.start_command);
          break;
        case "undeploy":
          if (adapter.undeploy_command) await step("undeploy", adapter.undeploy_command);
          this.remove(adapter.name);
          out.push("[undeploy] files removed");
          break;
        default:
          if (!this.deployed(adapter.name)) { out.push(`adapter '${adapter.name}' is not deployed on this edge`); err = true; break; }
          await step(command, adapter[`${command}_command`]);
      }
    } catch (e) {
      out.push((e as Error).message);
      err = true;
    }
    return { err, command, output: out.join("\n") };
  }
}
