// Black-box harness: starts the built binary on free ports with its own data directory and
// talks to it over real HTTP. Runs on Node (tap); no Bun APIs here.
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Test } from "tap";
import { createHash } from "node:crypto";
import { createPgDatabase, dropPgDatabase, pgUrlFor } from "../pgdb.ts";

export const BIN = process.env.OUTPOST_BIN ?? resolve(process.cwd(), "dist/outpost-linux-x64");

/** Ports handed out by this process, never handed out twice. */
const handedOut = new Set<number>();

/** A port nothing listens on, chosen below the kernel's ephemeral range (32768 and up): a port
 *  the kernel picked for us could be given to an outgoing connection of a parallel test between
 *  our check and the server's bind. */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 10_000 + Math.floor(Math.random() * 22_000);
    if (handedOut.has(port)) continue;
    const free = await new Promise<boolean>((res) => {
      const s = net.createServer();
      s.once("error", () => res(false));
      s.listen(port, "127.0.0.1", () => s.close(() => res(true)));
    });
    if (free) { handedOut.add(port); return port; }
  }
}

export interface RunResult { code: number | null; stdout: string; stderr: string }

/** Runs the binary to completion (for --help, --version, bad flags). */
export function runBin(args: string[], opts: { env?: Record<string, string>; cwd?: string; timeoutMs?: number } = {}): Promise<RunResult> {
  return new Promise((res) => {
    const p = spawn(BIN, args, { cwd: opts.cwd, env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", TMPDIR: process.env.TMPDIR ?? "/tmp", ...opts.env } });
    let stdout = "", stderr = "";
    p.stdout.on("data", (d) => (stdout += d));
    p.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => p.kill("SIGKILL"), opts.timeoutMs ?? 15_000);
    p.on("exit", (code) => { clearTimeout(timer); res({ code, stdout, stderr }); });
  });
}

export interface Outpost {
  url: string;
  httpPort: number;
  mqttPort: number;
  mqttWsPort: number;
  dataDir: string;
  proc: ChildProcess;
  logs(): string;
  /** SIGTERM and wait for exit. */
  stop(): Promise<number | null>;
  /** SIGKILL and wait for exit. */
  kill(): Promise<void>;
}

export interface StartOptions {
  args?: string[];
  env?: Record<string, string>;
  dataDir?: string;
  cwd?: string;
  /** keep the data directory after stop (for restart tests) */
  keepData?: boolean;
  waitForHealth?: boolean;
  /** keep the built-in throttling cases (3 sign-ins per 10 minutes per account): off unless a
   *  test is about them, because suites sign the same users in many times */
  defaultThrottlers?: boolean;
  /** the default libSQL file under the data directory whatever OUTPOST_TEST_DB says (a test of
   *  that default) */
  defaultDb?: boolean;
  /** fixed ports (a process started again where clients expect it); free ones otherwise */
  httpPort?: number;
  mqttPort?: number;
  /** --log-level: "warn" unless a test reads the log */
  logLevel?: string;
  /** --metrics-token: METRICS_TOKEN unless a test chooses (null: none) */
  metricsToken?: string | null;
  healthTimeoutMs?: number;
}

/** Starts the binary; when a parallel test took one of its ports first, again on new ports. */
export async function startOutpost(opts: StartOptions = {}): Promise<Outpost> {
  for (let attempt = 1; ; attempt++) {
    try { return await startOutpostOnce(opts); }
    catch (e) {
      if (attempt >= 4 || !/EADDRINUSE|address already in use|Is port \d+ in use/.test(String(e))) throw e;
    }
  }
}

/** The engine platforms started by the tests keep their data in: OUTPOST_TEST_DB=postgres gives
 *  each platform a PostgreSQL database of its own (test/pgdb.ts), one per data directory, so a
 *  platform started again on its data directory finds its data; edges and tests that choose
 *  their --db keep theirs. */
export const TEST_DB = process.env.OUTPOST_TEST_DB === "postgres" ? "postgres" : "libsql";

/** Whether a command line (with its environment) starts a platform that takes the default --db. */
function takesTestDb(args: readonly string[], env: Record<string, string> | undefined): boolean {
  if (args.some((a) => a === "--db" || a.startsWith("--db=") || a === "--config" || a.startsWith("--config="))) return false;
  if (env?.OUTPOST_DB || env?.OUTPOST_CONFIG) return false;
  const mode = args.find((a, i) => args[i - 1] === "--mode") ?? args.find((a) => a.startsWith("--mode="))?.slice(7) ?? env?.OUTPOST_MODE;
  return mode !== "edge";
}

/** The name of a data directory's PostgreSQL database: the test run's (scripts/test.ts drops what
 *  its run leaves), then the directory's. */
export const pgDatabaseOf = (dataDir: string) =>
  `outpost_e2e_${process.env.OUTPOST_TEST_RUN ?? "x"}_${createHash("sha256").update(resolve(dataDir)).digest("hex").slice(0, 16)}`;

/** The extra arguments that put a platform's data where the run wants it (see TEST_DB). */
export async function testDbArgs(dataDir: string, args: readonly string[], env?: Record<string, string>): Promise<string[]> {
  if (TEST_DB !== "postgres" || !takesTestDb(args, env)) return [];
  return ["--db", await createPgDatabase(pgDatabaseOf(dataDir))];
}

/** Two cluster nodes (n0, n1) on a Redis and a shared database of the test's own, started, in a
 *  fresh directory, with `extraArgs` each; everything they need is stopped and removed through
 *  `cleanups` (run last first), their logs written to $OUTPOST_CLUSTER_LOGS when it is set.
 *  `redisUp`: the Redis answered (the test asserts it). */
export async function startTwoNodes(prefix: string, cleanups: (() => Promise<unknown> | void)[], extraArgs: readonly string[] = []): Promise<{ nodes: [NodeProcess, NodeProcess]; redisUp: boolean; db: string }> {
  const dir = mkdtempSync(join(tmpdir(), `outpost-${prefix}-`));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const redis = await startRedis();
  cleanups.push(redis.stop);
  const shared = await sharedClusterDb(dir);
  cleanups.push(shared.drop);
  const args = (id: string) => () => ["--db", shared.url, "--redis-url", `redis://127.0.0.1:${redis.port}`, "--node-id", id, "--secret-key", `${prefix}-test-secret-key-0123456789`, ...extraArgs];
  for (const n of ["n0", "n1"]) mkdirSync(join(dir, n));
  const nodes: [NodeProcess, NodeProcess] = [new NodeProcess("n0", await freePort(), join(dir, "n0"), args("n0")), new NodeProcess("n1", await freePort(), join(dir, "n1"), args("n1"))];
  for (const n of nodes) await n.start();
  cleanups.push(async () => {
    for (const n of nodes) await n.kill();
    if (process.env.OUTPOST_CLUSTER_LOGS) for (const n of nodes) writeFileSync(join(process.env.OUTPOST_CLUSTER_LOGS, `${prefix}-${n.name}.log`), n.logs());
  });
  return { nodes, redisUp: redis.up, db: shared.url };
}

/** An Outpost process a test starts, stops, kills and starts again on the same data directory,
 *  HTTP port and MQTT port, its output kept for failure messages. A platform's database comes
 *  from the run's engine (testDbArgs) unless `args` name one. */
export class NodeProcess {
  private run: Outpost | null = null;
  /** the output of its earlier runs */
  private earlier = "";
  mqttPort = 0;
  constructor(readonly name: string, readonly port: number, readonly dir: string, readonly args: () => string[], readonly env: Record<string, string> = {}) {}
  get url() { return `http://127.0.0.1:${this.port}`; }
  logs() { return this.earlier + (this.run?.logs() ?? ""); }
  get running() { return this.run !== null; }
  async start(timeoutMs = 30_000) {
    this.mqttPort ||= await freePort();
    try {
      this.run = await startOutpostOnce({ dataDir: this.dir, httpPort: this.port, mqttPort: this.mqttPort, args: this.args(), env: this.env, logLevel: "info", healthTimeoutMs: timeoutMs });
    } catch (e) { throw new Error(`${this.name}: ${(e as Error).message}`); }
  }
  private async end(how: "stop" | "kill") {
    const r = this.run;
    this.run = null;
    if (!r) return;
    await r[how]();
    this.earlier += r.logs();
  }
  kill() { return this.end("kill"); }
  stop() { return this.end("stop"); }
}

/** What a platform the harness started has stored, as bytes to search: its database files on
 *  libSQL, a dump of its database on PostgreSQL. */
export function storedData(o: { dataDir: string }): { name: string; bytes: Buffer }[] {
  if (TEST_DB === "postgres") {
    const dump = spawnSync("pg_dump", ["--data-only", pgUrlFor(pgDatabaseOf(o.dataDir))], { maxBuffer: 1 << 30 });
    if (dump.status !== 0) throw new Error(`pg_dump failed: ${dump.stderr}`);
    return [{ name: "pg_dump", bytes: dump.stdout }];
  }
  return readdirSync(o.dataDir).filter((f) => f.startsWith("outpost.db")).map((f) => ({ name: f, bytes: readFileSync(join(o.dataDir, f)) }));
}

/** Drops the PostgreSQL database of a data directory that goes away (nothing on libSQL). */
export async function dropTestDb(dataDir: string): Promise<void> {
  if (TEST_DB === "postgres") await dropPgDatabase(pgDatabaseOf(dataDir)).catch(() => {});
}

async function startOutpostOnce(opts: StartOptions): Promise<Outpost> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), "outpost-e2e-"));
  const [httpPort, mqttPort, mqttWsPort, tls, wss] = await Promise.all([opts.httpPort ?? freePort(), opts.mqttPort ?? freePort(), freePort(), freePort(), freePort()]);
  const args = [
    "--http-port", String(httpPort), "--http-host", "127.0.0.1", "--mqtt-port", String(mqttPort), "--mqtt-ws-port", String(mqttWsPort),
    "--mqtt-tls-port", String(tls), "--mqtt-wss-port", String(wss),
    "--data-dir", dataDir, "--log-level", opts.logLevel ?? "warn", ...(opts.defaultThrottlers ? [] : ["--enable-default-throttlers", "false"]),
    ...(opts.metricsToken === null ? [] : ["--metrics-token", opts.metricsToken ?? METRICS_TOKEN]), ...(opts.args ?? []),
  ];
  if (!opts.defaultDb) args.push(...(await testDbArgs(dataDir, args, opts.env)));
  const proc = spawn(BIN, args, {
    cwd: opts.cwd ?? dataDir,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", TMPDIR: process.env.TMPDIR ?? "/tmp", ...opts.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  proc.stdout!.on("data", (d) => (out += d));
  proc.stderr!.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((r) => proc.on("exit", (code) => r(code)));
  const url = `http://127.0.0.1:${httpPort}`;
  const o: Outpost = {
    url, httpPort, mqttPort, mqttWsPort, dataDir, proc,
    logs: () => out,
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
      const code = await exited;
      if (!opts.keepData && !opts.dataDir) { rmSync(dataDir, { recursive: true, force: true }); await dropTestDb(dataDir); }
      return code;
    },
    kill: async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
      await exited;
    },
  };
  if (opts.waitForHealth !== false) {
    const deadline = Date.now() + (opts.healthTimeoutMs ?? 15_000);
    for (;;) {
      if (proc.exitCode !== null) {
        if (!opts.dataDir) { rmSync(dataDir, { recursive: true, force: true }); await dropTestDb(dataDir); }
        throw new Error(`outpost exited with ${proc.exitCode}:\n${out}`);
      }
      try {
        const r = await request(url, "GET", "/health");
        if (r.status === 200) break;
      } catch { /* not up yet */ }
      if (Date.now() > deadline) { await o.kill(); throw new Error(`outpost did not come up:\n${out}`); }
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  return o;
}

/** Certificates made with openssl in `dir` (which needs openssl): a throwaway CA and a certificate
 *  it signed for 127.0.0.1 and localhost; `anotherCa` makes a CA that signed nothing. */
export function testCertificates(dir: string, caName = "Outpost test CA") {
  const openssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  const selfSigned = (name: string, cn: string) => { openssl("req", "-x509", ...ec, "-keyout", `${name}.key`, "-out", `${name}.pem`, "-days", "2", "-subj", `/CN=${cn}`); return join(dir, `${name}.pem`); };
  const ca = selfSigned("ca", caName);
  openssl("req", ...ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost");
  writeFileSync(join(dir, "ext.cnf"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf");
  return { ca, cert: join(dir, "server.pem"), key: join(dir, "server.key"), anotherCa: (cn: string) => selfSigned("other", cn) };
}

/** The --metrics-token of the processes the harness starts (unless a test chooses). */
export const METRICS_TOKEN = "e2e-metrics-token-0123456789";

/** GET /metrics with the harness' token (the API port answers it only to its bearer). */
export function metrics(o: { url: string }, headers: Record<string, string> = {}): Promise<HttpResponse<string>> {
  return request(o.url, "GET", "/metrics", { headers: { authorization: `Bearer ${METRICS_TOKEN}`, ...headers } });
}

export interface HttpResponse<T = any> { status: number; headers: http.IncomingHttpHeaders; text: string; body: T }

/** A raw HTTP request (node:http, so GET and DELETE may carry bodies). A string body is sent as is. */
export function request<T = any>(base: string, method: string, path: string, opts: { headers?: Record<string, string>; body?: unknown; chunked?: boolean } = {}): Promise<HttpResponse<T>> {
  const u = new URL(base);
  const payload = opts.body === undefined ? undefined : typeof opts.body === "string" || Buffer.isBuffer(opts.body) ? opts.body : JSON.stringify(opts.body);
  return new Promise((res, rej) => {
    let answered = false;
    const req = http.request({
      host: u.hostname, port: u.port, method, path,
      headers: { ...(payload !== undefined && !opts.chunked ? { "content-length": String(Buffer.byteLength(payload)) } : {}), ...opts.headers },
      agent: false,
    }, (r) => {
      answered = true;
      const chunks: Buffer[] = [];
      r.on("data", (c) => chunks.push(c));
      r.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let body: any = text;
        try { body = JSON.parse(text); } catch { /* not JSON */ }
        res({ status: r.statusCode ?? 0, headers: r.headers, text, body });
      });
    });
    // A server may answer before reading the whole body (a 413) and close: the answer counts.
    req.on("error", (e: NodeJS.ErrnoException) => {
      if (answered) return;
      if (e.code === "EPIPE" || e.code === "ECONNRESET") setTimeout(() => { if (!answered) rej(e); }, 2000);
      else rej(e);
    });
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

/** A client bound to one server and a set of headers. */
export class Client {
  constructor(readonly base: string, readonly headers: Record<string, string> = {}) {}
  with(headers: Record<string, string>) { return new Client(this.base, { ...this.headers, ...headers }); }
  req<T = any>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    return request<T>(this.base, method, path, { headers: { ...this.headers, ...headers }, body });
  }
  get<T = any>(path: string, headers?: Record<string, string>) { return this.req<T>("GET", path, undefined, headers); }
  post<T = any>(path: string, body?: unknown, headers?: Record<string, string>) { return this.req<T>("POST", path, body, headers); }
  put<T = any>(path: string, body?: unknown, headers?: Record<string, string>) { return this.req<T>("PUT", path, body, headers); }
  del<T = any>(path: string, body?: unknown, headers?: Record<string, string>) { return this.req<T>("DELETE", path, body, headers); }
}

let seq = 0;
export const uniq = (prefix = "x") => `${prefix}${Date.now().toString(36)}${(seq++).toString(36)}`;

export interface DevSystem {
  dev: Client; devToken: string; devId: string; email: string; password: string;
  systemKey: string; systemSecret: string;
  /** key + secret headers, no token */
  app: Client;
}

/** Registers a developer and creates a system. */
export async function devWithSystem(o: { url: string }, name = "sys"): Promise<DevSystem> {
  const email = `${uniq("dev")}@example.com`, password = "dev-password-1";
  const reg = await request(o.url, "POST", "/admin/reg", { body: { email, password, fname: "D", lname: "V", org: "Org" } });
  if (reg.status !== 200) throw new Error(`register failed: ${reg.text}`);
  const dev = new Client(o.url, { "ClearBlade-DevToken": reg.body.dev_token });
  const sys = await dev.post("/admin/systemmanagement", { name, description: "test system" });
  if (sys.status !== 200) throw new Error(`system create failed: ${sys.text}`);
  return {
    dev, devToken: reg.body.dev_token, devId: reg.body.user_id, email, password,
    systemKey: sys.body.appID, systemSecret: sys.body.appSecret,
    app: new Client(o.url, { "ClearBlade-SystemKey": sys.body.appID, "ClearBlade-SystemSecret": sys.body.appSecret }),
  };
}

/** Registers a user in the system and returns a client carrying its token. */
export async function newUser(s: DevSystem, extra: Record<string, unknown> = {}) {
  const email = `${uniq("user")}@example.com`, password = "user-password-1";
  const r = await s.app.post("/api/v/1/user/reg", { email, password, ...extra });
  if (r.status !== 200) throw new Error(`user reg failed: ${r.text}`);
  return { email, password, userId: r.body.user_id as string, token: r.body.user_token as string, client: new Client(s.app.base, { "ClearBlade-UserToken": r.body.user_token }), reg: r.body };
}

/** Checks the ClearBlade error envelope and returns it. */
/** The body of a request that must answer 200; anything else throws with `what`, the status and
 *  the start of the answer (a test's setup step, not its assertion). */
export async function must(r: Promise<{ status: number; text: string; body: any }>, what: string) {
  const x = await r;
  if (x.status !== 200) throw new Error(`${what}: ${x.status} ${x.text.slice(0, 300)}`);
  return x.body;
}

export function isEnvelope(body: any, status: number): boolean {
  return !!body && typeof body === "object" && !!body.error && typeof body.error.id === "string" &&
    /^[0-9a-f-]{36}$/.test(body.error.id) && typeof body.error.code === "number" && typeof body.error.message === "string" &&
    typeof body.error.detail === "string" && body.statusCode === status && !/\bat \S+:\d+/.test(JSON.stringify(body));
}

/** Servers from Debian packages (Redis, PostgreSQL, MariaDB) that some tests need: those tests
 *  are skipped with the reason where the server is missing, unless OUTPOST_REQUIRE_SERVICES is
 *  set (.ci/run sets it), where a missing server fails them. Returns tap's `skip` option. */
export async function needs(what: string, present: boolean | Promise<boolean>): Promise<{ skip: string | false }> {
  if ((await present) || process.env.OUTPOST_REQUIRE_SERVICES) return { skip: false };
  return { skip: `${what} is not available here (bash scripts/test-databases.sh or apt-get install it; .ci/run does both)` };
}

export function canConnect(port: number, host = "127.0.0.1", timeoutMs = 1000): Promise<boolean> {
  return new Promise((res) => {
    const s = net.connect(port, host);
    const done = (ok: boolean) => { s.destroy(); res(ok); };
    s.setTimeout(timeoutMs, () => done(false));
    s.once("connect", () => done(true));
    s.once("error", () => done(false));
  });
}

export function hasCommand(cmd: string): boolean {
  return spawnSync("sh", ["-c", `command -v ${cmd}`]).status === 0;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Resolves once everything the broker had written to an MQTT client has reached it: an
 *  UNSUBSCRIBE round trip on the client's own connection, answered after what the broker wrote
 *  before. The broker routes a publish to every subscriber in one pass (writing each delivery on
 *  the turn after), and handles a client's next packet after its last publish was routed: once a
 *  positive control or a later marker shows a publish routed, a delivery of it to another client,
 *  a leak included, has reached that client by the time its flush answers. Record what a client
 *  gets as each PUBLISH arrives ('packetreceive'): a QoS 2 'message' event waits for the PUBREL,
 *  later than the flush. Rejects when the broker does not answer in `ms`. */
export function mqttFlush(client: { unsubscribeAsync(topic: string): Promise<unknown> }, ms = 5_000): Promise<void> {
  return new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`no answer to a flush within ${ms} ms`)), ms);
    client.unsubscribeAsync(`flush/none/${uniq("f")}`).then(() => { clearTimeout(timer); res(); }, (e) => { clearTimeout(timer); rej(e); });
  });
}

/** Polls `pred` until it holds or `ms` pass; returns whether it held. A `pred` that throws (a
 *  server restarting, say) counts as not yet. */
export async function waitFor(pred: () => boolean | Promise<boolean>, ms = 15_000, every = 50): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    try { if (await pred()) return true; } catch { /* not yet */ }
    if (Date.now() > deadline) return false;
    await sleep(every);
  }
}

/** A query object as a URL parameter. */
export const qs = (q: unknown) => encodeURIComponent(JSON.stringify(q));

/** Asserts an error answer: the status, the envelope and, when given, the envelope's error code
 *  (`isErr(t, r, 400, "what")` or `isErr(t, r, 400, 204, "what")`). */
export function isErr(t: Test, r: HttpResponse, status: number, codeOrWhat?: number | string, what = "") {
  const code = typeof codeOrWhat === "number" ? codeOrWhat : undefined;
  if (typeof codeOrWhat === "string") what = codeOrWhat;
  t.equal(r.status, status, `${what} -> ${status}${r.status === status ? "" : ` (got ${r.status} ${r.text.slice(0, 300)})`}`);
  t.ok(isEnvelope(r.body, status), `${what}: error envelope`);
  if (code !== undefined) t.equal(r.body?.error?.code, code, `${what}: error.code ${code}`);
}

/** Asserts a 200, showing the body when it is not. */
export function ok200(t: Test, r: HttpResponse, what = "") {
  t.equal(r.status, 200, `${what} -> 200${r.status === 200 ? "" : ` (got ${r.status} ${r.text.slice(0, 300)})`}`);
}

/** A collection with columns, made by the system's developer. */
export async function collectionWith(sys: DevSystem, columns: [string, string][], name = uniq("col")) {
  const r = await sys.dev.post("/admin/collectionmanagement", { name, appID: sys.systemKey });
  if (r.status !== 200) throw new Error(`create collection: ${r.text}`);
  const id = r.body.collectionID as string;
  for (const [n, type] of columns) {
    const a = await sys.dev.put("/admin/collectionmanagement", { id, addColumn: { name: n, type } });
    if (a.status !== 200) throw new Error(`add column: ${a.text}`);
  }
  return { id, name };
}

/** A redis-server of a test's own on a free port, waited for (`up`: it answered within 10 s);
 *  `stop` kills it. For the cluster tests, whose nodes share it. */
export async function startRedis(): Promise<{ port: number; up: boolean; stop(): Promise<void> }> {
  const port = await freePort();
  const redis = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
  const stop = async () => { if (redis.exitCode === null) { redis.kill("SIGKILL"); await new Promise((r) => redis.once("exit", r)); } };
  return { port, up: await waitFor(() => canConnect(port), 10_000), stop };
}

/** The database the nodes of a test's cluster share: a libSQL file in `dir`, or a database of its
 *  own on PostgreSQL when the suite runs there; `drop` removes the PostgreSQL one. */
export async function sharedClusterDb(dir: string): Promise<{ url: string; drop(): Promise<void> }> {
  if (TEST_DB !== "postgres") return { url: `file:${join(dir, "outpost.db")}`, drop: async () => {} };
  const url = await createPgDatabase();
  return { url, drop: () => dropPgDatabase(url).catch(() => {}) };
}
