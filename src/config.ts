// Configuration: one zod schema, filled from flags > environment (OUTPOST_*) > config file > defaults.
import { readFileSync } from "node:fs";
import { z } from "zod";
import { EgressPolicy } from "./code/egress.ts";
import { LOG_LEVELS } from "./core/log.ts";

/** A number given as a number or as digits (flags and env are text); "" is not 0. */
const intText = z.union([z.number(), z.string().trim().regex(/^-?\d+$/, "must be a whole number").transform(Number)]);
const port = intText.pipe(z.number().int().min(0).max(65535));
/** A share in (0, 1], given as a number or as text ("0.5"). */
const fraction = z.union([z.number(), z.string().trim().regex(/^\d*\.?\d+$/, "must be a number").transform(Number)]).pipe(z.number().gt(0).max(1));
const bool = z.union([z.boolean(), z.enum(["true", "false", "1", "0", "yes", "no"]).transform((v) => ["true", "1", "yes"].includes(v))]);

export const ConfigSchema = z.object({
  mode: z.enum(["platform", "edge"]).default("platform"),
  httpPort: port.default(9000),
  httpHost: z.string().default("0.0.0.0"),
  mqttPort: port.default(1883),
  mqttWsPort: port.default(8903),
  mqttTlsPort: port.default(1884),
  mqttWssPort: port.default(8904),
  tlsCert: z.string().optional(),
  tlsKey: z.string().optional(),
  // HTTPS for the API when --tls-cert/--tls-key are set (plain HTTP goes on unless --http-port 0)
  httpsPort: port.default(9443),
  // browsers on other origins: "*" or a comma list of origins
  corsOrigins: z.string().trim().min(1).default("*"),
  dataDir: z.string().min(1).default("./data"),
  db: z.string().optional(),
  dbAuthToken: z.string().optional(),
  dbDriver: z.enum(["auto", "native", "client"]).default("auto"),
  // PostgreSQL: connections each node holds open at most
  dbPoolMax: intText.pipe(z.number().int().min(2).max(1000)).default(10),
  logLevel: z.enum(LOG_LEVELS).default("info"),
  // the access log (one line per HTTP request, at info): every request, only answers >= 400, or
  // none; and the share of the successful ones written when it is "all"
  accessLog: z.enum(["all", "errors", "off"]).default("all"),
  accessLogSample: fraction.default(1),
  // the audit trail (asset changes, password resets, MQTT connects): on or off, and its bounds
  audit: z.enum(["on", "off"]).default("on"),
  auditRetentionDays: intText.pipe(z.number().int().min(1).max(36_500)).default(90),
  auditMaxRows: intText.pipe(z.number().int().min(1_000)).default(1_000_000),
  // bucket sets and file stores kept in a local directory: where (default <data-dir>/files), and
  // the largest file one write may store (the HTTP server takes no body over 64 MiB)
  filesDir: z.string().min(1).optional(),
  maxFileMb: intText.pipe(z.number().int().min(1).max(64)).default(32),
  // /metrics: on the API port only with this bearer token; without one, only on --metrics-port
  // (127.0.0.1; 0: no such listener)
  metricsToken: z.string().min(16, "must be at least 16 characters").optional(),
  metricsPort: port.default(0),
  // system keys in metric labels: the N busiest systems get their own series, the others "other"
  // (0: no system keys in labels)
  metricsSystemLabels: intText.pipe(z.number().int().min(0).max(1000)).default(0),
  developmentMode: bool.default(false),
  adminEmail: z.string().email().optional(),
  adminPassword: z.string().min(1).optional(),
  registrationKey: z.string().optional(),
  devTokenTtl: intText.pipe(z.number().int()).default(432000),
  // edge
  platformUrl: z.string().url().optional(),
  systemKey: z.string().regex(/^[0-9a-f]{20,40}$/, "must be a system key (hex)").optional(),
  edgeName: z.string().min(1).optional(),
  edgeToken: z.string().min(1).optional(),
  // the token read from a file: on the command line it shows in ps to every local user
  edgeTokenFile: z.string().min(1).optional(),
  // CA bundle (PEM file) an edge trusts for an https:// platform, besides the system's
  platformCa: z.string().optional(),
  adaptersDir: z.string().optional(),
  adaptersUser: z.string().min(1).default("nobody"),
  // edge: the command lines its platform may run on it (command-exec), one a line, and who they
  // run as when the edge runs as root
  edgeCommandsFile: z.string().min(1).optional(),
  edgeCommandsUser: z.string().min(1).default("nobody"),
  // platform: how long an edge may stay silent on a request relayed to it (seconds)
  edgeRequestTimeout: intText.pipe(z.number().int().min(1).max(3_600)).default(60),
  edgeTemplatesDir: z.string().default("./edge-templates"),
  // edge sync: how often an edge pings (either side drops a link silent for two periods), and how
  // far ahead of the platform's clock (seconds) a row stamp may be
  syncPingMs: intText.pipe(z.number().int().min(200).max(600_000)).default(15_000),
  maxClockSkew: intText.pipe(z.number().int().min(1)).default(300),
  // platform: how often the change log drops what every edge acknowledged
  syncCompactMs: intText.pipe(z.number().int().min(100).max(86_400_000)).default(60_000),
  // how often a failing sync link is logged: an edge's failed attempts to reach its platform (per
  // cause), a platform's refusals of an edge (per edge); the first one at once
  syncLogMs: intText.pipe(z.number().int().min(100).max(86_400_000)).default(60_000),
  // edge: the outbox's bounds, its size (MB) and the age of its oldest item (seconds; 0: none);
  // past either the oldest items are dropped
  outboxMaxMb: intText.pipe(z.number().int().min(1)).default(256),
  outboxMaxAge: intText.pipe(z.number().int().min(0)).default(0),
  // files between an edge and its platform (bucket sets' outbox and inbox): the largest file sent
  // or taken (a larger one fails at once), and the most bytes sent but not acknowledged per link
  fileSyncMaxBytes: intText.pipe(z.number().int().min(1)).default(1024 * 1024 * 1024),
  fileSyncInflightBytes: intText.pipe(z.number().int().min(64 * 1024).max(256 * 1024 * 1024)).default(8 * 1024 * 1024),
  // health: free disk below which the node is unhealthy (MB); on an edge, how long the platform
  // link may be down before it is (seconds), or never when the edge is meant to run offline
  minFreeMb: intText.pipe(z.number().int().min(0)).default(100),
  linkGrace: intText.pipe(z.number().int().min(1)).default(300),
  linkLossOk: bool.default(false),
  // messaging
  historyMaxRows: intText.pipe(z.number().int().min(0)).default(1000),
  historyMaxAge: intText.pipe(z.number().int().min(1)).default(604800),
  mqttOfflineQueueLimit: intText.pipe(z.number().int().min(1)).default(1000),
  // code engine
  codeMemoryLimitMb: intText.pipe(z.number().int().min(4).max(4096)).default(64),
  codeSliceMs: intText.pipe(z.number().int().min(10).max(600_000)).default(500),
  // code workers: how many (default: twice the cores as far as the memory gives each worker a
  // sandbox's limit, at least the cores and 2; defaultWorkers in src/code/poolTypes.ts), their
  // memory together, the share of them one system may hold, and how many runs of one system may
  // wait for one
  codeWorkers: intText.pipe(z.number().int().min(1).max(256)).optional(),
  codeMemoryMb: intText.pipe(z.number().int().min(32).max(65_536)).default(256),
  codeMaxShare: fraction.default(0.5),
  codeQueue: intText.pipe(z.number().int().min(1).max(100_000)).default(256),
  // trigger runs of one system that wait for room in its code queue (past it: failed runs)
  codeTriggerBacklog: intText.pipe(z.number().int().min(0).max(10_000_000)).default(100_000),
  // the workers' scheduling priority below the event loop's (nice, 0: the same)
  codeNice: intText.pipe(z.number().int().min(0).max(19)).default(0),
  codeStreamsMax: intText.pipe(z.number().int().min(0).max(100_000)).default(100),
  // outbound HTTP from code: host names, addresses and CIDR ranges allowed besides public
  // addresses (a comma list; a config file may give a list)
  codeEgressAllow: z.union([z.string(), z.array(z.string()).transform((l) => l.join(","))]).default(""),
  // throttling: the built-in cases are on unless disabled (or in development mode)
  enableDefaultThrottlers: bool.default(true),
  enableGlobalThrottlers: bool.default(false),
  // Redis: shared throttling windows, and with it a cluster of platform nodes on one database
  redisUrl: z.string().regex(/^rediss?:\/\/./, "must be a redis:// or rediss:// URL").optional(),
  // this node's name in a cluster (default: hostname:http-port)
  nodeId: z.string().trim().regex(/^[A-Za-z0-9_.:-]{1,128}$/, "letters, digits and . _ : - only (at most 128)").optional(),
  // external databases: the key their credentials are sealed with (default: <data-dir>/secret.key)
  secretKey: z.string().min(16, "must be at least 16 characters").optional(),
  externalDbTimeoutMs: intText.pipe(z.number().int().min(100).max(600_000)).default(30_000),
}).strict().superRefine((c, ctx) => {
  if (c.mode === "edge") {
    for (const k of ["platformUrl", "systemKey", "edgeName", "edgeToken"] as const)
      if (!c[k]) ctx.addIssue({ code: "custom", path: [k], message: "required in edge mode" });
    // an edge keeps its state in an embedded file (it must run without any server)
    if (c.db && /^postgres(ql)?:\/\//i.test(c.db))
      ctx.addIssue({ code: "custom", path: ["db"], message: "an edge keeps its data in libSQL (file:PATH); PostgreSQL is for platforms" });
  }
  if ((c.tlsCert && !c.tlsKey) || (!c.tlsCert && c.tlsKey))
    ctx.addIssue({ code: "custom", path: ["tlsCert"], message: "--tls-cert and --tls-key go together" });
  if (c.tlsCert && c.httpPort !== 0 && c.httpPort === c.httpsPort)
    ctx.addIssue({ code: "custom", path: ["httpsPort"], message: "must differ from --http-port (or --http-port 0: HTTPS only)" });
  try { EgressPolicy.parse(c.codeEgressAllow); }
  catch (e) { ctx.addIssue({ code: "custom", path: ["codeEgressAllow"], message: (e as Error).message }); }
  for (const o of c.corsOrigins.split(",").map((x) => x.trim()))
    if (o !== "*" && !/^https?:\/\/[^/\s]+$/.test(o)) ctx.addIssue({ code: "custom", path: ["corsOrigins"], message: `'${o}' is not an origin (scheme://host[:port]) or *` });
});

export type Config = z.infer<typeof ConfigSchema> & { db: string };

export class ConfigError extends Error {}

const kebab = (s: string) => s.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase());
const camel = (s: string) => s.replace(/[-_]([a-z])/g, (_, c: string) => c.toUpperCase());
const KEYS = Object.keys(ConfigSchema.shape) as (keyof typeof ConfigSchema.shape)[];
const BOOLEAN_KEYS = new Set(["developmentMode", "enableDefaultThrottlers", "enableGlobalThrottlers", "linkLossOk"]);

/** Flag spellings existing ClearBlade edge installs use. */
const FLAG_ALIASES: Record<string, string> = {
  "edge-id": "edgeName",
  "edge-cookie": "edgeToken",
  "parent-system": "systemKey",
  "edge-listen-port": "httpPort",
  "broker-tcp-port": "mqttPort",
  "broker-ws-port": "mqttWsPort",
  "broker-tls-port": "mqttTlsPort",
  "broker-wss-port": "mqttWssPort",
  "adaptors-root-dir": "adaptersDir",
};
/** Flags that are combined into platformUrl. */
const PLATFORM_HOST_FLAGS = new Set(["platform-ip", "novi-ip"]);

export interface ParsedArgs { values: Record<string, unknown>; help: boolean; version: boolean }

const FLAG = /^--?([A-Za-z][A-Za-z0-9-]*)(?:=(.*))?$/s;
const flagKey = (name: string) => FLAG_ALIASES[name] ?? (PLATFORM_HOST_FLAGS.has(name) || name === "platform-port" ? name : camel(name));
const isSpecialFlag = (name: string) => PLATFORM_HOST_FLAGS.has(name) || name === "platform-port" || name === "config";
const isKnownFlagName = (name: string) =>
  ["help", "h", "version", "v"].includes(name) || isSpecialFlag(name) || (KEYS as string[]).includes(flagKey(name));

/** Whether a word is one of our flags: a value may start with "-" (a token, a negative number). */
function isKnownFlag(word: string): boolean {
  const m = FLAG.exec(word);
  return !!m && isKnownFlagName(m[1]!.toLowerCase());
}

/** Whether parseArgs takes `next` as the value of the flag `name` written without "=" (a value
 *  may start with "-": a token, a negative number). Subcommands that pass flags on use it. */
export function takesValue(name: string, next: string | undefined): boolean {
  if (next === undefined) return false;
  if (BOOLEAN_KEYS.has(flagKey(name.toLowerCase()))) return /^(true|false|1|0|yes|no)$/.test(next);
  return !isKnownFlag(next);
}

export function parseArgs(argv: string[]): ParsedArgs {
  const values: Record<string, unknown> = {};
  let help = false, version = false, platformHost: string | undefined, platformPort: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const m = FLAG.exec(arg);
    if (!m) throw new ConfigError(`unexpected argument '${arg}' (flags look like --name value or --name=value)`);
    const name = m[1]!.toLowerCase();
    if (name === "help" || name === "h") { help = true; continue; }
    if (name === "version" || name === "v") { version = true; continue; }
    const key = flagKey(name);
    if (!isKnownFlagName(name)) throw new ConfigError(`unknown flag --${name} (see --help)`);
    const isBool = BOOLEAN_KEYS.has(key);
    let value: string | undefined = m[2];
    if (value === undefined) {
      const next = argv[i + 1];
      if (isBool && (next === undefined || !/^(true|false|1|0|yes|no)$/.test(next))) value = "true";
      // the next word is another of our flags: this one was given no value
      else if (next === undefined || isKnownFlag(next)) throw new ConfigError(`flag --${name} needs a value`);
      else { value = next; i++; }
    }
    if (PLATFORM_HOST_FLAGS.has(name)) { platformHost = value; continue; }
    if (name === "platform-port") { platformPort = value; continue; }
    if (name === "config") { values.config = value; continue; }
    values[key] = value;
  }
  if (platformHost !== undefined || platformPort !== undefined) {
    if (!platformHost) throw new ConfigError("--platform-port needs --platform-ip");
    const withScheme = /^[a-z]+:\/\//.test(platformHost) ? platformHost : `http://${platformHost}`;
    const u = new URL(withScheme);
    if (platformPort) u.port = platformPort;
    else if (!u.port && !/^[a-z]+:\/\//.test(platformHost)) u.port = "9000";
    values.platformUrl ??= u.toString().replace(/\/$/, "");
  }
  return { values, help, version };
}

function fromEnv(env: Record<string, string | undefined>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of KEYS) {
    const v = env[`OUTPOST_${kebab(k).replace(/-/g, "_").toUpperCase()}`];
    if (v !== undefined && v !== "") out[k] = v;
  }
  return out;
}

function fromFile(path: string): Record<string, unknown> {
  let text: string;
  try { text = readFileSync(path, "utf8"); } catch (e) { throw new ConfigError(`cannot read config file ${path}: ${(e as Error).message}`); }
  let raw: unknown;
  try {
    raw = path.endsWith(".toml") ? Bun.TOML.parse(text) : JSON.parse(text);
  } catch (e) { throw new ConfigError(`config file ${path} is not valid ${path.endsWith(".toml") ? "TOML" : "JSON"}: ${(e as Error).message}`); }
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw new ConfigError(`config file ${path} must hold an object`);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(raw as Record<string, unknown>)) out[camel(k)] = v;
  return out;
}

/** A layer (file, environment, flags) naming --edge-token-file gives the token at that layer's
 *  precedence. */
function withTokenFile(layer: Record<string, unknown>): Record<string, unknown> {
  const path = layer.edgeTokenFile;
  if (typeof path !== "string" || !path) return layer;
  if (layer.edgeToken !== undefined) throw new ConfigError("--edge-token and --edge-token-file: give one of them");
  let token: string;
  try { token = readFileSync(path, "utf8").trim(); } catch (e) { throw new ConfigError(`cannot read --edge-token-file ${path}: ${(e as Error).message}`); }
  if (!token) throw new ConfigError(`--edge-token-file ${path} is empty`);
  return { ...layer, edgeToken: token };
}

export function loadConfig(argv: string[], env: Record<string, string | undefined> = process.env): Config & { help: boolean; version: boolean } {
  const args = parseArgs(argv);
  const envValues = fromEnv(env);
  const file = (args.values.config as string | undefined) ?? (env.OUTPOST_CONFIG || undefined);
  delete args.values.config;
  const fileValues = file ? fromFile(file) : {};
  const merged = { ...withTokenFile(fileValues), ...withTokenFile(envValues), ...withTokenFile(args.values) };
  // read once per start: zod's compiled parser (generated and compiled on a schema's first parse)
  // would cost more than it saves (about 5 ms of a cold start)
  const r = ConfigSchema.safeParse(merged, { jitless: true });
  if (!r.success) {
    const lines = r.error.issues.map((i) => {
      if (i.code === "unrecognized_keys") return `unknown setting${i.keys.length > 1 ? "s" : ""}: ${i.keys.join(", ")}`;
      const key = String(i.path[0] ?? "");
      return `--${kebab(key)}: ${i.message}`;
    });
    throw new ConfigError(lines.join("\n"));
  }
  const c = r.data;
  return { ...c, db: c.db ?? `file:${c.dataDir.replace(/\/$/, "")}/outpost.db`, help: args.help, version: args.version };
}

export const HELP = `outpost — IoT platform and edge runtime in one binary

Usage: outpost --mode platform|edge [flags]
       outpost status [flags]      sync status of a fleet or of this edge (outpost status --help)
       outpost backup DEST [flags] copy the database and secret key, while running (outpost backup --help)
       outpost restore SRC [flags] put a backup back, the instance stopped
       outpost migrate-db --from file:PATH --to postgres://...   move a platform's data to PostgreSQL

General
  --mode platform|edge        run as the cloud platform (default) or as an edge
  --http-port N               HTTP API port (9000)
  --mqtt-port N               MQTT over TCP (1883)
  --mqtt-ws-port N            MQTT over WebSocket, path /mqtt (8903)
  --mqtt-tls-port N           MQTT over TLS when --tls-cert/--tls-key are set (1884)
  --mqtt-wss-port N           MQTT over secure WebSocket when TLS is set (8904)
  --tls-cert FILE --tls-key FILE
                              TLS for MQTT and for the HTTP API (HTTPS on --https-port)
  --https-port N              HTTPS API port when TLS is set (9443); with TLS, --http-port 0
                              turns plain HTTP off
  --cors-origins LIST         origins browsers may call the API from: * (default) or a comma
                              list (https://app.example.com,http://localhost:3000)
  --data-dir DIR              where local state lives (./data)
  --db URL                    libSQL database: file:PATH, libsql://, http(s)://, or on a
                              platform PostgreSQL: postgres://USER:PASSWORD@HOST:PORT/DB
                              (default file:<data-dir>/outpost.db)
  --db-auth-token TOKEN       token for a remote libSQL server
  --db-pool-max N             PostgreSQL: connections held open at most (10)
  --config FILE               JSON or TOML file with any of these settings
  --log-level LEVEL           debug|info|warn|error|silent (info)
  --access-log all|errors|off one line per HTTP request at info (5xx at warn): all of them,
                              only answers >= 400, or none (all)
  --access-log-sample F       with --access-log all: the share of answers < 400 written, 0 < F <= 1 (1)
  --audit on|off              the audit trail: asset changes, password resets, MQTT connects (on)
  --audit-retention-days N    audit rows older than this are dropped (90)
  --audit-max-rows N          audit rows kept at most; the oldest go first (1000000)
  --files-dir DIR             bucket sets and file stores on local storage (<data-dir>/files)
  --max-file-mb N             the largest file one write may store, in MiB, at most 64 (32)
  --development-mode          development mode (disables the built-in throttling cases)
  --admin-email E --admin-password P
                              create a platform admin developer on first start
  --registration-key KEY      require this key in developer registration

Edge
  --platform-url URL          the platform this edge syncs with (also --platform-ip/--platform-port)
  --system-key KEY            the edge's system (also --parent-system)
  --edge-name NAME            the edge's name (also --edge-id)
  --edge-token TOKEN          the edge's token (also --edge-cookie). On the command line every
                              local user can read it (ps): prefer --edge-token-file or the
                              environment (OUTPOST_EDGE_TOKEN)
  --edge-token-file FILE      read the edge's token from FILE
  --platform-ca FILE          PEM CA bundle to trust for an https:// platform URL
  --adapters-dir DIR          where adapter files go (also --adaptors-root-dir)
  --adapters-user USER        who adapter commands run as when the edge runs as root (nobody)
  --edge-commands-file FILE   edge: the command lines the platform may run here (command-exec),
                              one a line, # for comments; read at each use (none: no commands)
  --edge-commands-user USER   edge run as root: who those commands run as (nobody)
  --edge-request-timeout S    platform: how long an edge may stay silent on a request relayed to
                              it with ClearBlade-Edge before the caller gets 504 (60)
  --edge-templates-dir DIR    named edge templates, one JSON file each (./edge-templates)
  --sync-ping-ms N            edge: how often the sync link is checked; a link silent for two
                              periods is dropped and made again (15000)
  --max-clock-skew SECONDS    platform: an edge's row stamps further ahead of the platform's clock
                              are refused and the platform stamps the writes itself (300)
  --sync-compact-ms N         platform: how often the change log drops what every edge has (60000)
  --sync-log-ms N             how often a failing sync link is logged: on an edge, its failed
                              attempts to reach the platform with their cause; on a platform, the
                              edges it refuses (the first at once, then once per N ms) (60000)
  --outbox-max-mb N           edge: most the outbox (writes waiting for the platform) holds; past it
                              the oldest are dropped, logged and counted on /metrics (256)
  --outbox-max-age SECONDS    edge: outbox items older than this are dropped the same way (0: never)
  --file-sync-max-bytes N     the largest file edge sync sends or takes; larger fails (1073741824)
  --file-sync-inflight-bytes N
                              file bytes sent to the other side and not yet acknowledged, per
                              link (8388608)

Metrics (Prometheus text on GET /metrics)
  --metrics-token TOKEN       serve /metrics on the API port to Authorization: Bearer TOKEN only
                              (at least 16 characters); without it the API port answers 404
  --metrics-port N            serve /metrics without a token on 127.0.0.1:N (0: not at all) (0)
  --metrics-system-labels N   give the N busiest systems their own series (system_key label),
                              the others "other" (0: no system keys in labels) (0)

Health (GET /health answers 503 with the reasons)
  --min-free-mb N             free disk under the database below which the node is unhealthy (100)
  --link-grace SECONDS        edge: how long the platform link may be down before it is (300)
  --link-loss-ok              edge: a lost link is reported, never unhealthy (an edge meant to
                              run offline)

Messaging
  --history-max-rows N        messages kept per topic by default (1000; 0 = no history)
  --history-max-age SECONDS   age limit of message history (604800 = 7 days)
  --mqtt-offline-queue-limit N  queued QoS 1/2 messages kept per offline client (1000)

Code engine
  --code-memory-limit-mb N    memory per service sandbox (64)
  --code-slice-ms N           longest stretch of user code without yielding before it is stopped (500)
  --code-workers N            threads running code (twice the cores while --code-memory-mb
                              gives each a sandbox's memory; at least the cores, and 2)
  --code-memory-mb N          memory of all sandboxes of all workers together (256)
  --code-max-share F          the share of the workers one system may hold at once (0.5)
  --code-queue N              runs of one system waiting for a worker before calls get 429 (256)
  --code-trigger-backlog N    trigger runs of one system waiting for room in that queue; past
                              it they are recorded as failed runs (100000)
  --code-nice N               how far below the event loop the code workers are scheduled, as
                              nice: HTTP, MQTT and sync go first when the cores are full (0; 0-19)
  --code-streams-max N        stream services (execution_timeout -1) one system may run at once (100)
  --code-egress-allow LIST    where outbound HTTP from code may go besides public addresses: a
                              comma list of host names (*.example.com too), IP addresses and
                              CIDR ranges, e.g. 127.0.0.1,10.0.0.0/8,api.internal (none)

Throttling
  --enable-default-throttlers true|false   the built-in brute-force cases (true)
  --enable-global-throttlers true|false    share frequency windows through Redis (false)
  --redis-url URL             Redis for global throttling; on a platform it also joins the nodes
                              on the same database into a cluster (see README: Running a cluster)
  --node-id NAME              this node's name in a cluster (default: hostname:http-port)

External databases
  --secret-key TEXT           key for stored credentials; every node of a platform needs the same
                              (default: a random key in <data-dir>/secret.key)
  --external-db-timeout-ms N  longest a data operation may run (30000)

Every flag can also be set as OUTPOST_<NAME> in the environment (e.g. OUTPOST_HTTP_PORT=9001)
or in the config file. Precedence: flags > environment > config file > defaults.
Single or double dashes both work; --name=value and --name value both work.

SIGHUP reads the settings again and applies --log-level, --access-log, --access-log-sample,
the throttling flags and --cors-origins (others at the next start); SIGTERM stops after draining (at most 20 s).
One instance per --data-dir: a second one exits with status 2, as does a port already taken.

  --help, --version
`;
