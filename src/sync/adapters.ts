// Edge side of adapter control (spec §4.10): files written under the adapters directory, never
// outside it; permissions (and owner/group when running as root) set; the adapter's mapped
// command run in its directory with a time limit, its output returned.
import { spawn } from "node:child_process";
import { chmodSync, closeSync, existsSync, lstatSync, mkdirSync, mkdtempSync, openSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join, normalize, relative, resolve, sep } from "node:path";

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

/** Most output bytes kept from one command. */
const OUTPUT_MAX = 64 * 1024;
const NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9_.]{0,127}$/;

/** A file's relative path, normalised; null when it is absolute or climbs out with `..`. */
export function safeRelativePath(p: string): string | null {
  if (!p || p.includes("\0") || isAbsolute(p) || /^[A-Za-z]:/.test(p) || p.startsWith("\\")) return null;
  const n = normalize(p.replace(/\\/g, "/"));
  if (n === "." || n.startsWith("..") || n.split(sep).includes("..")) return null;
  return n.replace(/\/+$/, "");
}

/** Octal permission text ("755", "0644"); null when it is not. */
export function permissionBits(p: string): number | null {
  return /^0?[0-7]{3}$/.test(p) ? parseInt(p, 8) : null;
}

export class AdapterRunner {
  constructor(private readonly root: string) {}

  /** The adapter's directory, inside the root (the name is checked, so it cannot climb out). */
  dir(adapter: string): string {
    if (!NAME_RE.test(adapter)) throw new Error(`invalid adapter name '${adapter}'`);
    return join(this.root, adapter);
  }

  deployed(adapter: string) { return existsSync(this.dir(adapter)); }

  /** Writes the files; each one must land inside the adapter's directory, symlinks included. */
  writeFiles(adapter: string, files: ControlFile[]): string[] {
    const base = this.dir(adapter);
    mkdirSync(base, { recursive: true });
    const realBase = realpathSync(base);
    const notes: string[] = [];
    for (const f of files) {
      const rel = safeRelativePath(f.path_name || f.name);
      if (!rel) throw new Error(`file '${f.name}': path '${f.path_name}' leaves the adapter's directory`);
      const target = resolve(realBase, rel);
      mkdirSync(dirname(target), { recursive: true });
      const parent = realpathSync(dirname(target));
      if (parent !== realBase && !parent.startsWith(realBase + sep)) throw new Error(`file '${f.name}': path '${f.path_name}' leaves the adapter's directory`);
      if (existsSync(target) && lstatSync(target).isSymbolicLink()) rmSync(target); // never write through a link
      writeFileSync(target, Buffer.from(f.content, "base64"));
      const mode = permissionBits(f.permissions);
      if (mode !== null) chmodSync(target, mode);
      if ((f.owner || f.group) && process.getuid?.() === 0) {
        const who = `${f.owner}${f.group ? `:${f.group}` : ""}`;
        const r = Bun.spawnSync(["chown", who, target]);
        if (r.exitCode !== 0) notes.push(`chown ${who} ${relative(realBase, target)}: ${r.stderr.toString().trim()}`);
      }
    }
    return notes;
  }

  remove(adapter: string) { rmSync(this.dir(adapter), { recursive: true, force: true }); }

  /** Runs a shell command in the adapter's directory; output goes to a file, so a process the
   *  command leaves running in the background cannot hold the call open. */
  run(adapter: string, command: string, timeoutMs: number): Promise<{ code: number | null; timedOut: boolean; output: string }> {
    const cwd = this.dir(adapter);
    mkdirSync(cwd, { recursive: true });
    const outDir = mkdtempSync(join(tmpdir(), "outpost-adapter-"));
    const outPath = join(outDir, "out");
    const fd = openSync(outPath, "w");
    return new Promise((res) => {
      const child = spawn("sh", ["-c", command], { cwd, stdio: ["ignore", fd, fd], detached: true, env: { ...process.env, OUTPOST_ADAPTER: adapter } });
      closeSync(fd);
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        try { process.kill(-child.pid!, "SIGKILL"); } catch { child.kill("SIGKILL"); }
      }, timeoutMs);
      let done = false;
      const finish = (code: number | null) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        let output = "";
        try { const b = readFileSync(outPath); output = b.subarray(0, OUTPUT_MAX).toString("utf8") + (b.length > OUTPUT_MAX ? "\n[output truncated]" : ""); } catch { /* none */ }
        rmSync(outDir, { recursive: true, force: true });
        res({ code, timedOut, output });
      };
      child.once("error", () => finish(null));
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
