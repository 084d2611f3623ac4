// ClearBlade's CLI (cb-cli) for the black-box tests that run it: which binaries to run and running
// one. cb-cli is not part of this project and its source is on GitHub only, so it must be given:
// OUTPOST_CBCLI lists cb-cli binaries (paths separated by ':'), and OUTPOST_CBCLI_SRC names a clone
// of ClearBlade's cb-cli repository, built here at its last commit that vendors its dependencies
// (June 2020: it builds offline, in GOPATH mode, with Debian's golang-go) when Go is installed.
import { type SpawnSyncReturns, spawn, spawnSync } from "node:child_process";
import { accessSync, constants, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Test } from "tap";

/** cb-cli's last commit with a vendor/ directory: it builds with no module proxy. */
const VENDORED_COMMIT = "63c018c11ec875e4b51d30ed64a1ecb5469e8d13";
const HOW = "set OUTPOST_CBCLI=/path/to/cb-cli (several: separated by ':'), or OUTPOST_CBCLI_SRC=/path/to/a clone of ClearBlade's cb-cli repository with Go installed (apt-get install golang-go)";

export interface CbCli { path: string; modern: boolean }
/** What a cb-cli run gave: its exit code and its output, stdout and stderr together. */
export interface CbCliRun { code: number | null; out: string }

/** Debian's versioned Go packages install to /usr/lib/go-<version>/bin; golang-go puts one on PATH. */
function findGo(): string | null {
  if (spawnSync("sh", ["-c", "command -v go"]).status === 0) return "go";
  const dirs = existsSync("/usr/lib") ? readdirSync("/usr/lib").filter((d) => /^go-\d/.test(d)).sort().reverse() : [];
  for (const d of dirs) if (existsSync(`/usr/lib/${d}/bin/go`)) return `/usr/lib/${d}/bin/go`;
  return null;
}

const ok = (r: SpawnSyncReturns<string>, what: string) => {
  if (r.status !== 0) throw new Error(`${what}: ${r.error?.message ?? ""}${r.stdout ?? ""}${r.stderr ?? ""}`.slice(0, 2000));
};

/** Builds cb-cli at its vendored commit from a clone (or from a tree of that commit) into `dir`. */
function buildCbCli(src: string, go: string, dir: string): string {
  const gopath = join(dir, "gopath"), tree = join(gopath, "src/github.com/clearblade/cb-cli");
  mkdirSync(tree, { recursive: true });
  if (existsSync(join(src, ".git")) || existsSync(join(src, "HEAD"))) {
    const archive = spawnSync("sh", ["-c", 'git -C "$1" archive "$2" | tar -x -C "$3"', "sh", src, VENDORED_COMMIT, tree], { encoding: "utf8" });
    ok(archive, `cb-cli ${VENDORED_COMMIT.slice(0, 7)} from ${src}`);
  } else cpSync(src, tree, { recursive: true });
  if (!existsSync(join(tree, "vendor"))) throw new Error(`${src}: no vendor/ directory at cb-cli ${VENDORED_COMMIT.slice(0, 7)}`);
  const out = join(dir, "cb-cli");
  const env = { ...process.env, GOPATH: gopath, GO111MODULE: "off", GOPROXY: "off", GOFLAGS: "", CGO_ENABLED: "0", GOTOOLCHAIN: "local" };
  ok(spawnSync(go, ["build", "-o", out, "."], { cwd: tree, env, encoding: "utf8", timeout: 15 * 60_000 }), "go build");
  return out;
}

/** cb-cli's flags tell its version: the current one takes -dev-token on init. */
function describe(path: string): CbCli {
  accessSync(path, constants.X_OK);
  const r = spawnSync(path, ["init", "-h"], { encoding: "utf8", input: "", timeout: 30_000, cwd: tmpdir() });
  return { path, modern: `${r.stdout}${r.stderr}`.includes("-dev-token") };
}

const listed = (process.env.OUTPOST_CBCLI ?? "").split(":").filter(Boolean);
const src = process.env.OUTPOST_CBCLI_SRC;
const go = src ? findGo() : null;

/** Why no cb-cli can run here, or null when one can. */
export const cbcliUnavailable: string | null = listed.length || (src && go) ? null
  : src ? `cb-cli cannot be built from OUTPOST_CBCLI_SRC: Go is not installed (apt-get install golang-go)` : `cb-cli is not available: ${HOW}`;

/** The cb-cli binaries to run: those listed, and one built from OUTPOST_CBCLI_SRC (removed when
 *  `t` ends; a build takes about a minute on two cores). */
export function cbclis(t: Test): CbCli[] {
  const clis = listed.map(describe);
  if (src && go) {
    const dir = mkdtempSync(join(tmpdir(), "outpost-cbcli-build-"));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    clis.push(describe(buildCbCli(src, go, dir)));
  }
  return clis;
}

/** Runs cb-cli in `cwd` with its own HOME, killed after 3 minutes. */
export function runCbcli(path: string, cwd: string, args: string[], home: string): Promise<CbCliRun> {
  return new Promise((res) => {
    // no terminal: a value cb-cli lacks would be asked for; it reads end of input instead and stops
    const p = spawn(path, args, { cwd, env: { PATH: process.env.PATH ?? "", HOME: home, TMPDIR: process.env.TMPDIR ?? "/tmp" }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (out += d));
    const timer = setTimeout(() => p.kill("SIGKILL"), 180_000);
    p.on("exit", (code) => { clearTimeout(timer); res({ code, out }); });
  });
}
