// `outpost status`: sync status for scripts and terminals. Against a platform it shows a system's
// edges (or one edge's assets) through the public API; run on an edge without --platform-url it
// asks that edge's local API (GET /api/v/4/edge/status) with the edge's own token.
// Exit status: 0 nothing failed and every edge is connected, 1 an asset failed, 3 an edge (or, on
// an edge, its platform) is unreachable, 2 a bad command line, 4 the API could not be asked.
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import tls from "node:tls";
import { ConfigError, loadConfig, takesValue } from "../config.ts";
import { ago } from "../core/ago.ts";

export const STATUS_HELP = `outpost status — sync status of a fleet, of one edge, or of this edge

Usage: outpost status --platform-url URL --system-key KEY [--edge NAME] [--failed] [--json]
                      (--dev-token TOKEN | --email E --password P)
       outpost status [--config FILE | the edge's flags] [--failed] [--json]
                      on an edge: its own link and assets, from its local API

  --platform-url URL    the platform (http:// or https://)
  --system-key KEY      the system whose edges to show
  --edge NAME           one edge's assets instead of the table of edges
  --failed              only what failed (edges with failed assets, failed assets)
  --json                one JSON document instead of tables
  --dev-token TOKEN     a developer token (also OUTPOST_DEV_TOKEN)
  --email E --password P  sign in as a developer instead (also OUTPOST_EMAIL, OUTPOST_PASSWORD)
  --platform-ca FILE    PEM CA bundle the platform's certificate is checked against
  --config FILE         on an edge: its configuration (as given to the edge; OUTPOST_* and the
                        edge's own flags work too)

Exit status: 0 all synced or pending, 1 an asset failed, 3 an edge is unreachable (on an edge:
its platform), 2 a bad command line, 4 the API could not be asked (unreachable, refused sign-in).
`;

const EXIT = { ok: 0, failed: 1, usage: 2, unreachable: 3, api: 4 } as const;
const FLAGS = new Set(["platform-url", "system-key", "edge", "failed", "json", "dev-token", "email", "password", "platform-ca", "config", "help"]);
const BOOLEAN = new Set(["failed", "json", "help"]);
const TIMEOUT_MS = 10_000;

class UsageError extends Error {}
class ApiFailure extends Error {}

interface Out { write(s: string): unknown }
export interface StatusIo { stdout: Out; stderr: Out; env: Record<string, string | undefined>; now?: () => number }

/** Our flags, and the others: on an edge those are the edge's own (its configuration, checked
 *  as the edge checks it); against a platform they are an error. */
const isStatusFlag = (word: string) => { const m = /^--?([A-Za-z][A-Za-z0-9-]*)(?:=|$)/.exec(word); return !!m && (FLAGS.has(m[1]!) || m[1] === "h"); };

function parse(argv: string[]): { f: Record<string, string | true>; rest: string[] } {
  const out: Record<string, string | true> = {}, rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const m = /^--?([A-Za-z][A-Za-z0-9-]*)(?:=(.*))?$/s.exec(argv[i]!);
    if (!m) throw new UsageError(`unexpected argument '${argv[i]}'`);
    const name = m[1]!;
    if (name === "h") { out.help = true; continue; }
    if (!FLAGS.has(name)) {
      // an edge's own flag, passed on with its value (which may start with "-": a token)
      rest.push(argv[i]!);
      const next = argv[i + 1];
      if (m[2] === undefined && takesValue(name, next) && !isStatusFlag(next!)) rest.push(argv[++i]!);
      continue;
    }
    if (BOOLEAN.has(name)) { out[name] = m[2] === undefined ? true : m[2]; continue; }
    const v = m[2] ?? argv[++i];
    if (v === undefined || (m[2] === undefined && /^--?[a-z]/.test(v) && FLAGS.has(v.replace(/^--?/, "").split("=")[0]!))) throw new UsageError(`flag --${name} needs a value`);
    out[name] = v;
  }
  return { f: out, rest };
}

/** A call to the API: the parsed JSON, or ApiFailure with what went wrong. */
type Tls = { ca: string } | undefined;

async function call(base: string, method: string, path: string, headers: Record<string, string>, tls: Tls, body?: unknown): Promise<any> {
  let r: Response;
  try {
    r = await fetch(base.replace(/\/$/, "") + path, {
      method, headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(TIMEOUT_MS), tls,
    });
  } catch (e) {
    throw new ApiFailure(`cannot reach ${base}: ${(e as Error).message}`);
  }
  const text = await r.text();
  let json: any;
  try { json = JSON.parse(text); } catch { json = undefined; }
  if (r.status !== 200) throw new ApiFailure(`${method} ${path}: ${r.status} ${json?.error?.detail ?? text.slice(0, 200)}`);
  return json;
}

/** Columns padded to their widest cell; the last column is not padded. */
function table(head: string[], rows: (string | number)[][]): string {
  const cells = [head, ...rows.map((r) => r.map((c) => String(c).replace(/\s+/g, " ")))];
  const w = head.map((_, i) => Math.max(...cells.map((r) => r[i]!.length)));
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(w[i]!))).join("  ").trimEnd()).join("\n") + "\n";
}

interface Asset { asset_type: string; asset_name: string; status: string; desired_version?: number; applied_version?: number; attempts?: number; last_error: string }
const countOf = (assets: Asset[], status: string) => assets.filter((a) => a.status === status).length;

export async function statusCommand(argv: string[], io: StatusIo): Promise<number> {
  try {
    const { f, rest } = parse(argv);
    if (f.help) { io.stdout.write(STATUS_HELP); return EXIT.ok; }
    // an edge's own configuration (a file, or its flags, which name its platform too), or no
    // platform named at all: this edge's own status
    const edgeConfig = f.config !== undefined || rest.some((a) => /^--?mode(=|$)/.test(a));
    if (edgeConfig || f["platform-url"] === undefined) return await local(f, rest, io);
    if (rest.length) throw new UsageError(`unknown flag ${rest[0]!.split("=")[0]}`);
    return await fleet(f, io);
  } catch (e) {
    if (e instanceof UsageError || e instanceof ConfigError) {
      io.stderr.write(`outpost status: ${e.message.split("\n").join("\noutpost status: ")}\nRun 'outpost status --help' for the flags.\n`);
      return EXIT.usage;
    }
    if (e instanceof ApiFailure) { io.stderr.write(`outpost status: ${e.message}\n`); return EXIT.api; }
    throw e;
  }
}

const str = (v: string | true | undefined) => (typeof v === "string" ? v : undefined);

function readCa(path: string | undefined): { ca: string } | undefined {
  if (!path) return undefined;
  try { return { ca: readFileSync(path, "utf8") }; } catch (e) { throw new UsageError(`--platform-ca ${path}: ${(e as Error).message}`); }
}

async function fleet(f: Record<string, string | true>, io: StatusIo): Promise<number> {
  const base = str(f["platform-url"])!;
  if (!/^https?:\/\/[^/\s]+/.test(base)) throw new UsageError(`--platform-url: '${base}' is not an http:// or https:// URL`);
  const sk = str(f["system-key"]);
  if (!sk) throw new UsageError("--system-key is required with --platform-url");
  if (!/^[0-9a-f]{20,40}$/.test(sk)) throw new UsageError("--system-key must be a system key (hex)");
  const tls = readCa(str(f["platform-ca"]));
  const now = io.now?.() ?? Date.now();
  let token = str(f["dev-token"]) ?? io.env.OUTPOST_DEV_TOKEN;
  let signedIn = false;
  if (!token) {
    const email = str(f.email) ?? io.env.OUTPOST_EMAIL, password = str(f.password) ?? io.env.OUTPOST_PASSWORD;
    if (!email || !password) throw new UsageError("a developer token is required: --dev-token (or OUTPOST_DEV_TOKEN), or --email and --password");
    token = (await call(base, "POST", "/admin/auth", {}, tls, { email, password })).dev_token as string;
    signedIn = true;
  }
  const h = { "ClearBlade-DevToken": token };
  try {
    const edgeName = str(f.edge);
    if (edgeName !== undefined) {
      const rec = await call(base, "GET", `/admin/edges/${sk}/${encodeURIComponent(edgeName)}`, h, tls);
      const assets = (await call(base, "GET", `/admin/${sk}/sync/edge/status/${encodeURIComponent(edgeName)}`, h, tls)) as Asset[];
      const shown = f.failed ? assets.filter((a) => a.status === "failed") : assets;
      if (f.json) {
        io.stdout.write(JSON.stringify({ system_key: sk, edge: { name: rec.name, connected: rec.isConnected === true, last_talked: rec.last_talked ?? null, sync_lag: rec.sync_lag ?? null,
          template: rec.template ?? "", last_refusal: rec.last_refusal ?? "", last_refusal_at: rec.last_refusal_at ?? null,
          pending: countOf(assets, "pending"), synced: countOf(assets, "synced"), failed: countOf(assets, "failed") }, assets: shown }, null, 2) + "\n");
      } else {
        io.stdout.write(`edge ${rec.name}: ${rec.isConnected ? "connected" : "UNREACHABLE"}, last talked ${ago(rec.last_talked, now)}, sync lag ${rec.sync_lag ?? "-"}; ` +
          `${countOf(assets, "pending")} pending, ${countOf(assets, "synced")} synced, ${countOf(assets, "failed")} failed\n`);
        if (rec.template) io.stdout.write(`named template ${rec.template}\n`);
        if (rec.last_refusal) io.stdout.write(`last refused ${ago(rec.last_refusal_at, now)}: ${rec.last_refusal}\n`);
        if (shown.length) io.stdout.write(table(["TYPE", "NAME", "STATUS", "DESIRED", "APPLIED", "ATTEMPTS", "LAST ERROR"],
          shown.map((a) => [a.asset_type, a.asset_name, a.status, a.desired_version ?? "", a.applied_version ?? "", a.attempts ?? "", a.last_error || "-"])));
      }
      return rec.isConnected !== true ? EXIT.unreachable : countOf(assets, "failed") ? EXIT.failed : EXIT.ok;
    }
    const records = (await call(base, "GET", `/admin/edges/${sk}`, h, tls)) as any[];
    const all = (await call(base, "GET", `/admin/${sk}/sync/alledges/status`, h, tls)) as { edge_name: string; assets: Asset[] }[];
    const assetsOf = new Map(all.map((e) => [e.edge_name, e.assets]));
    const edges = records.map((r) => {
      const assets = assetsOf.get(r.name) ?? [];
      return { name: r.name as string, connected: r.isConnected === true, last_talked: (r.last_talked ?? null) as number | null, sync_lag: (r.sync_lag ?? null) as number | null,
        last_refusal: (r.last_refusal ?? "") as string, last_refusal_at: (r.last_refusal_at ?? null) as number | null,
        pending: countOf(assets, "pending"), synced: countOf(assets, "synced"), failed: countOf(assets, "failed"), assets };
    }).sort((a, b) => a.name.localeCompare(b.name));
    const shown = f.failed ? edges.filter((e) => e.failed > 0) : edges;
    if (f.json) {
      io.stdout.write(JSON.stringify({ system_key: sk, edges: shown.map(({ assets, ...e }) => ({ ...e, ...(f.failed ? { assets: assets.filter((a) => a.status === "failed") } : {}) })) }, null, 2) + "\n");
    } else {
      io.stdout.write(table(["EDGE", "CONNECTED", "LAST TALKED", "LAG", "PENDING", "SYNCED", "FAILED"],
        shown.map((e) => [e.name, e.connected ? "yes" : "NO", ago(e.last_talked, now), e.sync_lag ?? "-", e.pending, e.synced, e.failed])));
      const failed = shown.flatMap((e) => e.assets.filter((a) => a.status === "failed").map((a) => [e.name, a.asset_type, a.asset_name, a.attempts ?? "", a.last_error || "-"]));
      if (failed.length) io.stdout.write("\n" + table(["EDGE", "TYPE", "NAME", "ATTEMPTS", "LAST ERROR"], failed));
      // why an unreachable edge is: the platform's last refusal of it (a wrong token, a version)
      const refused = shown.filter((e) => !e.connected && e.last_refusal).map((e) => [e.name, ago(e.last_refusal_at, now), e.last_refusal]);
      if (refused.length) io.stdout.write("\n" + table(["EDGE", "LAST REFUSED", "WHY"], refused));
      io.stdout.write(`\n${edges.length} edge${edges.length === 1 ? "" : "s"}: ${edges.filter((e) => e.connected).length} connected, ${edges.filter((e) => e.failed > 0).length} with failed assets\n`);
    }
    return edges.some((e) => !e.connected) ? EXIT.unreachable : edges.some((e) => e.failed > 0) ? EXIT.failed : EXIT.ok;
  } finally {
    // a session opened only for this command is closed again
    if (signedIn) await call(base, "POST", "/admin/logout", h, tls).catch(() => {});
  }
}

/** A GET to this edge's own HTTPS listener, which must present the certificate of --tls-cert: a
 *  certificate made for the gateway's name (perhaps by a CA this machine does not trust) is checked
 *  by what it is, and the token is sent only once it matched. HTTP/1.0, so the answer ends with
 *  the connection. */
function pinnedGet(host: string, port: number, path: string, headers: Record<string, string>, certFile: string): Promise<any> {
  let want: string;
  try { want = new X509Certificate(readFileSync(certFile)).fingerprint256; } catch (e) { throw new UsageError(`--tls-cert ${certFile}: ${(e as Error).message}`); }
  const where = `https://${host}:${port}`;
  return new Promise((res, rej) => {
    const sock = tls.connect({ host, port, rejectUnauthorized: false }, () => {
      if (sock.getPeerCertificate().fingerprint256 !== want) { sock.destroy(); rej(new ApiFailure(`${where} does not present the certificate of --tls-cert`)); return; }
      sock.write(`GET ${path} HTTP/1.0\r\nHost: ${host}:${port}\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("")}\r\n`);
    });
    const chunks: Buffer[] = [];
    sock.setTimeout(TIMEOUT_MS, () => { sock.destroy(); rej(new ApiFailure(`${where}: no answer`)); });
    sock.on("data", (d: Buffer) => chunks.push(d));
    sock.on("error", (e) => rej(new ApiFailure(`cannot reach ${where}: ${e.message}`)));
    sock.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? 0);
      const body = text.slice(text.indexOf("\r\n\r\n") + 4);
      let json: any;
      try { json = JSON.parse(body); } catch { json = undefined; }
      if (status !== 200) rej(new ApiFailure(`GET ${path}: ${status} ${json?.error?.detail ?? body.slice(0, 200)}`));
      else res(json);
    });
  });
}

/** On an edge: its local API, with its own token (or a developer token when given). */
async function local(f: Record<string, string | true>, rest: string[], io: StatusIo): Promise<number> {
  const given = (k: string) => (str(f[k]) ? [`--${k}`, str(f[k])!] : []);
  const c = loadConfig([...given("config"), ...given("platform-url"), ...given("system-key"), ...rest], io.env);
  if (c.mode !== "edge") throw new UsageError("--platform-url and --system-key are required (or run it on an edge, with the edge's configuration)");
  const host = c.httpHost === "0.0.0.0" || c.httpHost === "::" ? "127.0.0.1" : c.httpHost;
  const https = c.httpPort === 0 && !!c.tlsCert;
  const token = str(f["dev-token"]) ?? io.env.OUTPOST_DEV_TOKEN ?? c.edgeToken!;
  const headers = { "ClearBlade-DevToken": token };
  const st = https ? await pinnedGet(host, c.httpsPort, "/api/v/4/edge/status", headers, c.tlsCert!)
    : await call(`http://${host}:${c.httpPort}`, "GET", "/api/v/4/edge/status", headers, undefined);
  const now = io.now?.() ?? Date.now();
  const assets = (st.assets as Asset[]).filter((a) => !f.failed || a.status === "failed");
  if (f.json) io.stdout.write(JSON.stringify({ ...st, assets }, null, 2) + "\n");
  else {
    const failing = st.link_error as { cause: string; message: string; since: number; attempts: number } | null | undefined;
    const link = st.connected ? "connected" : st.refused ? `REFUSED (${st.refused})` : "UNREACHABLE";
    io.stdout.write(`edge ${st.edge} (system ${st.system_key})${st.template ? `, named template ${st.template}` : ""}\nplatform ${st.platform_url}: ${link}, last contact ${ago(st.last_contact, now)}\n` +
      (failing && !st.connected ? `  ${failing.cause}: ${failing.message} (${failing.attempts} tries since ${ago(failing.since, now)})\n` : "") +
      `outbox ${st.outbox} waiting; ${st.synced} synced, ${st.failed} failed\n`);
    if (assets.length) io.stdout.write("\n" + table(["TYPE", "NAME", "STATUS", "LAST ERROR"], assets.map((a) => [a.asset_type, a.asset_name, a.status, a.last_error || "-"])));
  }
  return !st.connected ? EXIT.unreachable : st.failed ? EXIT.failed : EXIT.ok;
}
