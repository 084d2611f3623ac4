// Running as a service on a gateway: one instance per data directory (a lock the kernel drops
// with the process), no port shared with another process, SIGHUP reloads the settings and never
// ends the process, private data files, and a database of a newer version refused.
// A gateway keeps its data in its libSQL file: these run on it whatever OUTPOST_TEST_DB says.
import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { BIN, freePort, request, runBin, startOutpost, waitFor } from "./harness.ts";

const dirs: string[] = [];
const tempDir = (p = "outpost-gw-") => { const d = mkdtempSync(join(tmpdir(), p)); dirs.push(d); return d; };
t.teardown(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

const NO_STACK = /\bat \S+:\d+:\d+/;
const mode = (p: string) => statSync(p).mode & 0o777;

/** Ports for a second process, all free except what the test means to clash. */
async function ports() {
  const [h, m, w, tl, ws] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
  return ["--http-host", "127.0.0.1", "--http-port", String(h), "--mqtt-port", String(m), "--mqtt-ws-port", String(w), "--mqtt-tls-port", String(tl), "--mqtt-wss-port", String(ws)];
}
const withPort = (args: string[], flag: string, port: number) => { const a = [...args]; a[a.indexOf(flag) + 1] = String(port); return a; };

t.test("one instance per data directory: a second start exits 2 naming the holder; a kill -9 leaves no lock behind", async (t) => {
  const dataDir = tempDir();
  const a = await startOutpost({ dataDir, defaultDb: true });
  t.teardown(() => a.kill());
  const second = await runBin(["--data-dir", dataDir, ...(await ports())], { timeoutMs: 8000 });
  t.equal(second.code, 2, "the second start exits 2");
  t.match(second.stderr, new RegExp(`data directory ${dataDir} is in use by process ${a.proc.pid}\\b`), "and says which process holds it");
  t.notMatch(second.stderr, NO_STACK, "no stack trace");
  t.equal((await request(a.url, "GET", "/health")).status, 200, "the first one is untouched");

  await a.kill(); // SIGKILL: nothing of ours runs on the way out
  const b = await startOutpost({ dataDir, defaultDb: true });
  t.equal((await request(b.url, "GET", "/health")).status, 200, "a new start takes the directory of a killed one");
  t.equal(await b.stop(), 0);
});

t.test("a port another process listens on is refused with exit 2 (no SO_REUSEPORT sharing)", async (t) => {
  const a = await startOutpost({ defaultDb: true });
  t.teardown(() => a.stop());
  const args = await ports();
  for (const [flag, port] of [["--http-port", a.httpPort], ["--mqtt-port", a.mqttPort], ["--mqtt-ws-port", a.mqttWsPort]] as const) {
    const r = await runBin(["--data-dir", tempDir(), ...withPort(args, flag, port)], { timeoutMs: 8000 });
    t.equal(r.code, 2, `${flag} taken: exit 2`);
    t.match(r.stderr, new RegExp(`${flag} ${port} is in use by another process`), `${flag}: says which port`);
    t.notMatch(r.stderr, NO_STACK, "no stack trace");
  }
  t.equal((await request(a.url, "GET", "/health")).status, 200, "the first one still answers");
});

/** The binary with exactly these flags (no --log-level of the harness's: the config file's must count). */
async function spawnWith(args: string[], dataDir: string): Promise<{ p: ChildProcess; url: string; logs: () => string; exited: Promise<number | null> }> {
  const all = [...(await ports()), "--data-dir", dataDir, ...args];
  const p = spawn(BIN, all, { env: { PATH: process.env.PATH ?? "", TMPDIR: process.env.TMPDIR ?? "/tmp" }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  p.stdout!.on("data", (d) => (out += d));
  p.stderr!.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((r) => p.on("exit", (code) => r(code)));
  const url = `http://127.0.0.1:${all[all.indexOf("--http-port") + 1]}`;
  if (!(await waitFor(async () => (await request(url, "GET", "/health")).status === 200, 15_000))) throw new Error(`did not come up:\n${out}`);
  return { p, url, logs: () => out, exited };
}

const preflight = (url: string, origin: string) =>
  request(url, "OPTIONS", "/api/v/1/user/info", { headers: { origin, "access-control-request-method": "GET" } });

t.test("SIGHUP reloads the config file (log level, throttling flags, CORS origins), logs what changed, never ends the process", async (t) => {
  const dir = tempDir();
  const cfg = join(dir, "outpost.json");
  writeFileSync(cfg, JSON.stringify({ logLevel: "warn", corsOrigins: "https://a.example", enableDefaultThrottlers: false }));
  const o = await spawnWith(["--config", cfg], join(dir, "data"));
  t.teardown(() => { o.p.kill("SIGKILL"); });
  t.equal((await preflight(o.url, "https://b.example")).status, 403, "b.example is not yet allowed");
  const signIns = async (email: string) => {
    const codes: number[] = [];
    for (let i = 0; i < 4; i++) codes.push((await request(o.url, "POST", "/admin/auth", { body: { email, password: "wrong" } })).status);
    return codes;
  };
  t.notOk((await signIns("guess-1@example.com")).includes(429), "built-in sign-in limits off");

  writeFileSync(cfg, JSON.stringify({ logLevel: "info", corsOrigins: "https://b.example", enableDefaultThrottlers: true, historyMaxRows: 5 }));
  o.p.kill("SIGHUP");
  const logged = await waitFor(() => /settings reloaded/.test(o.logs()), 5000);
  t.equal(o.p.exitCode, null, "still running after SIGHUP");
  if (!t.ok(logged, "the reload is logged")) return;
  const line = JSON.parse(o.logs().split("\n").find((l) => l.includes("settings reloaded"))!);
  t.same(line.changed, {
    logLevel: { from: "warn", to: "info" },
    corsOrigins: { from: "https://a.example", to: "https://b.example" },
    enableDefaultThrottlers: { from: false, to: true },
  }, "what changed, with old and new values");
  t.same(line.needRestart, ["history-max-rows"], "what needs a restart, by name");
  const p = await preflight(o.url, "https://b.example");
  t.equal(p.status, 204, "the new origin is allowed");
  t.equal(p.headers["access-control-allow-origin"], "https://b.example");
  t.equal((await preflight(o.url, "https://a.example")).status, 403, "the old one no longer");
  t.equal((await signIns("guess-2@example.com"))[3], 429, "built-in sign-in limits on: the 4th guess is throttled");

  // a file that does not parse: reported, the running settings kept
  writeFileSync(cfg, "{ not json");
  o.p.kill("SIGHUP");
  t.ok(await waitFor(() => /could not be read; keeping the running ones/.test(o.logs()), 5000), "a bad file is reported");
  t.equal(o.p.exitCode, null, "still running");
  t.equal((await preflight(o.url, "https://b.example")).status, 204, "settings kept");

  o.p.kill("SIGTERM");
  t.equal(await o.exited, 0, "SIGTERM still drains and exits 0");
  t.match(o.logs(), /"msg":"shutting down"/, "an info line after the reload: the new level is in force");
});

t.test("data files are the instance's alone: directory 0700, database and key 0600, also when an older start left them open", async (t) => {
  const dataDir = tempDir();
  const a = await startOutpost({ dataDir, defaultDb: true });
  await request(a.url, "POST", "/admin/reg", { body: { email: "perm@example.com", password: "pw-123456", fname: "a", lname: "b", org: "c" } });
  t.equal(mode(dataDir), 0o700, "data directory");
  for (const f of ["outpost.db", "outpost.db-wal", "outpost.db-shm", "secret.key", "outpost.lock"]) t.equal(mode(join(dataDir, f)), 0o600, f);
  await a.stop();
  chmodSync(dataDir, 0o755);
  for (const f of ["outpost.db", "secret.key"]) chmodSync(join(dataDir, f), 0o644);
  const b = await startOutpost({ dataDir, defaultDb: true });
  t.equal(mode(dataDir), 0o700, "a directory left 0755 is narrowed");
  for (const f of ["outpost.db", "secret.key"]) t.equal(mode(join(dataDir, f)), 0o600, `${f} left 0644 is narrowed`);
  await b.stop();
});

t.test("a database written by a newer schema version is refused: exit 2, nothing started", async (t) => {
  const dataDir = tempDir();
  const a = await startOutpost({ dataDir, defaultDb: true });
  await a.stop();
  const { default: Database } = await import("libsql");
  const db = new Database(join(dataDir, "outpost.db"));
  db.prepare(`INSERT INTO schema_migrations(version, name, applied_at) VALUES (100000, 'from the future', '')`).run();
  db.close();
  const r = await runBin(["--data-dir", dataDir, ...(await ports())], { timeoutMs: 8000 });
  t.equal(r.code, 2, "exit 2");
  const [, version] = /^outpost (\S+)/.exec((await runBin(["--version"])).stdout) ?? [];
  t.ok(r.stderr.startsWith("outpost: the database "), `one line saying why: ${r.stderr}`);
  t.match(r.stderr, `written by a newer version of Outpost (schema version 100000; this one, ${version}, knows up to `, "naming the schema versions and this binary's version");
  t.match(r.stderr, /run that version or a newer one, or restore a backup made by this one \(outpost restore; a package upgrade leaves one in \/var\/backups\/outpost\)/, "and what to do");
  t.notMatch(r.stderr, NO_STACK, "no stack trace");
  t.notMatch(r.stderr, /outpost started/, "nothing started");
});
