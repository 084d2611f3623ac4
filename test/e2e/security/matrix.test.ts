// Adversarial security matrix, black-box: every route of every route file (the table is in
// routes.ts, one line per route: method, path template, the kind of caller it is for, a sample
// valid body) is called
//  (a) with no token;
//  (b) with tokens of another system: developer B's dev token, and a user, a device and an
//      anonymous session of system B (user and device with the Administrator role there, so only
//      the system boundary can refuse them);
//  (c) with a user token and an anonymous token of system A on developer routes, and a developer
//      who is not the platform admin on admin routes;
//  (d) with logged-out tokens of A's developer and of an Administrator user of A, refresh tokens
//      used as access tokens, the system secret as a token, and a forged token;
// and every route that reads a body gets malformed JSON, wrong types for the whole body and for
// each field, an unknown field, own `__proto__` / `constructor` keys (raw JSON text, so they are
// real own keys), custom-column keys named like Object.prototype members, and 10,000-deep
// documents. Routes taking a `query` parameter get out-of-range paging, malformed and hostile
// queries. The path templates name real resources made in system A first, so every call reaches
// its handler (a baseline checks that the owner's GETs answer 200 and the sample bodies are
// accepted, so each fuzzed body differs from a working one in one thing only).
//
// Every answer must be free of 5xx, stack traces, SQL text and file paths, and every refusal a
// 4xx error envelope; authorization failures are 401/403 (404 where another system's resource must
// not be revealed; a logged-out, refresh or forged token may also get the spec's 400 "invalid
// token", code 204). The resources the refused calls aimed at are read before and after and must
// be unchanged, and after each route file the server still answers normal requests.
//
// Set MATRIX_REPORT=/some/file.json to get the failing cases as JSON as well.
import { writeFileSync } from "node:fs";
import t, { type Test } from "tap";
import { type DevSystem, type HttpResponse, canConnect, devWithSystem, isEnvelope, newUser, request, startOutpost, uniq } from "../harness.ts";
import { type Auth, type Ids, type Owner, type Route, fill, routes } from "./routes.ts";

const ADMIN_EMAIL = `${uniq("admin")}@example.com`, ADMIN_PASSWORD = "admin-password-1";
const o = await startOutpost({ args: ["--admin-email", ADMIN_EMAIL, "--admin-password", ADMIN_PASSWORD] });
const started = Date.now();
t.teardown(async () => {
  await o.stop();
  if (process.env.MATRIX_REPORT) writeFileSync(process.env.MATRIX_REPORT, JSON.stringify(failures, null, 1));
  t.comment(`matrix: ${sent} requests in ${((Date.now() - started) / 1000).toFixed(1)} s, ${failures.length} failing cases`);
});

const CONCURRENCY = 8;
const fresh = () => uniq("m");
const qs = (q: unknown) => encodeURIComponent(JSON.stringify(q));
const must = async (what: string, r: Promise<HttpResponse> | HttpResponse) => {
  const x = await r;
  if (x.status !== 200) throw new Error(`setup: ${what}: ${x.status} ${x.text.slice(0, 300)}`);
  return x.body;
};

// ---- two systems and their callers ----------------------------------------------------------

const A = await devWithSystem(o, "matrix-a");
const B = await devWithSystem(o, "matrix-b");
const SK = A.systemKey;
const devToken = (tok: string) => ({ "ClearBlade-DevToken": tok });
const userToken = (tok: string) => ({ "ClearBlade-UserToken": tok });
const deviceToken = (tok: string) => ({ "ClearBlade-DeviceToken": tok });
const keyHeaders = (s: DevSystem) => ({ "ClearBlade-SystemKey": s.systemKey, "ClearBlade-SystemSecret": s.systemSecret });

async function withRole(s: DevSystem, userId: string, email: string, password: string, role: string) {
  await must("role membership", s.dev.put(`/admin/user/${s.systemKey}`, { user: userId, changes: { roles: { add: [role] } } }));
  return (await must("re-auth", s.app.post("/api/v/1/user/auth", { email, password }))).user_token as string;
}

async function newDevice(s: DevSystem, name: string, key: string, extra: Record<string, unknown> = {}) {
  return must(`device ${name}`, s.dev.post(`/admin/devices/${s.systemKey}/${name}`, { type: "sensor", state: "initial", active_key: key, enabled: true, allow_key_auth: true, ...extra }));
}

async function register(email: string, password: string) {
  return (await must("dev reg", request(o.url, "POST", "/admin/reg", { body: { email, password, fname: "M", lname: "X", org: "O" } }))).dev_token as string;
}

// system A's callers
const userA = await newUser(A); // Authenticated role only
const adminUserA = await newUser(A);
const adminUserAToken = await withRole(A, adminUserA.userId, adminUserA.email, adminUserA.password, "Administrator");
const selfUser = await newUser(A);
const target = await newUser(A);
const del1 = await newUser(A);
const del2 = await newUser(A);
// logged-out sessions of A's developer and of A's Administrator user
const devOut = (await must("dev auth", request(o.url, "POST", "/admin/auth", { body: { email: A.email, password: A.password } }))).dev_token as string;
await must("dev logout", request(o.url, "POST", "/admin/logout", { headers: devToken(devOut) }));
const userOut = (await must("user auth", A.app.post("/api/v/1/user/auth", { email: adminUserA.email, password: adminUserA.password }))).user_token as string;
await must("user logout", request(o.url, "POST", "/api/v/1/user/logout", { headers: userToken(userOut) }));
const FORGED = "0123456789abcdef0123456789abcdef0123456789abcdef";
// refresh tokens are not access tokens
const refreshUser = (await must("user auth", A.app.post("/api/v/1/user/auth", { email: adminUserA.email, password: adminUserA.password }))).refresh_token as string;
const refreshDev = (await must("dev auth", request(o.url, "POST", "/admin/auth", { body: { email: A.email, password: A.password } }))).refresh_token as string;
if (!refreshUser || !refreshDev) throw new Error("setup: no refresh tokens");
// anonymous sessions of A and B
const anonA = (await must("anon A", A.app.post("/api/v/1/user/anon"))).user_token as string;
// developers on their own: the owner of the self routes, and a target of the admin's password reset
const selfDevEmail = `${uniq("selfdev")}@example.com`, selfDevPassword = "self-dev-pw-1";
const selfDevToken = await register(selfDevEmail, selfDevPassword);
const resetDevEmail = `${uniq("resetdev")}@example.com`;
await register(resetDevEmail, "reset-dev-pw-1");
const adminToken = (await must("admin auth", request(o.url, "POST", "/admin/auth", { body: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } }))).dev_token as string;

// system B's callers: an Administrator user and an Administrator device
const userB = await newUser(B);
const userBToken = await withRole(B, userB.userId, userB.email, userB.password, "Administrator");
const deviceBName = uniq("devb");
await newDevice(B, deviceBName, "device-b-key-1");
await must("device B role", B.dev.put(`/admin/devices/roles/${B.systemKey}/${deviceBName}`, { add: ["Administrator"] }));
const anonB = (await must("anon B", B.app.post("/api/v/1/user/anon"))).user_token as string;
const deviceBToken = (await must("device B auth", request(o.url, "POST", `/api/v/2/devices/${B.systemKey}/auth`, { body: { deviceName: deviceBName, activeKey: "device-b-key-1" } }))).deviceToken as string;

// ---- system A's resources -------------------------------------------------------------------

const skC = (await must("system C", A.dev.post("/admin/systemmanagement", { name: "matrix-c" }))).appID as string;
const skVictim = (await must("victim system", A.dev.post("/admin/systemmanagement", { name: "matrix-victim" }))).appID as string;
const ucol = uniq("ucol"), ucolVictim = uniq("ucolv");
for (const c of [ucol, ucolVictim]) await must("user column", A.dev.post(`/admin/user/${SK}/columns`, { column_name: c, type: "string" }));
const role = (await must("role", A.dev.post(`/admin/user/${SK}/roles`, { name: uniq("role") }))).role_id as string;
const roleVictim = (await must("victim role", A.dev.post(`/admin/user/${SK}/roles`, { name: uniq("rolev") }))).role_id as string;

async function collection(name: string) {
  const id = (await must("collection", A.dev.post("/admin/collectionmanagement", { name, appID: SK }))).collectionID as string;
  for (const [n, type] of [["s", "string"], ["n", "int"], ["u", "string"]]) await must("column", A.dev.put("/admin/collectionmanagement", { id, addColumn: { name: n, type } }));
  return id;
}
const colName = uniq("col");
const col = await collection(colName);
const ROW_SECRET = `rowA-${uniq("secret")}`;
await must("row", A.dev.post(`/api/v/1/data/${col}`, { s: ROW_SECRET, n: 1, u: "k0" }));
await must("unique index", A.dev.post(`/api/v/4/data/${col}/uniqueindex?columnName=u`));
const colVictim = await collection(uniq("colv"));

const device = uniq("dev"), deviceVictim = uniq("devv"), deviceAuth = uniq("deva"), deviceKey = "device-a-key-1";
await newDevice(A, device, deviceKey);
await newDevice(A, deviceAuth, deviceKey);
await newDevice(A, deviceVictim, "device-v-key-1");
const dcol = uniq("dcol"), dcolVictim = uniq("dcolv");
for (const c of [dcol, dcolVictim]) await must("device column", A.dev.post(`/admin/devices/${SK}/columns`, { column_name: c, type: "string" }));

const topic = `matrix/${uniq("t")}`;
const MSG_SECRET = `msgA-${uniq("secret")}`;
for (let i = 0; i < 2; i++) await must("publish", A.dev.post(`/api/v/1/message/${SK}/publish`, { topic, body: `${MSG_SECRET}-${i}`, qos: 0 }));

async function service(name: string, code: string) {
  await must(`service ${name}`, A.dev.post(`/admin/code/v/1/${SK}/${name}`, { code, parameters: [], systemID: SK, name }));
}
const svc = uniq("svc"), svcVictim = uniq("svcv"), failing = uniq("fail");
await service(svc, `function ${svc}(req, resp) { resp.success("ok"); }`);
await service(svcVictim, `function ${svcVictim}(req, resp) { resp.success("ok"); }`);
await service(failing, `function ${failing}(req, resp) { throw new Error("boom"); }`);
await A.dev.post(`/api/v/1/code/${SK}/${failing}`, {});
const failedList = (await must("failed runs", A.dev.get(`/codeadmin/failed/${SK}`)))[SK] as { id: string }[];
if (!failedList?.length) throw new Error("setup: no failed run recorded");
const failId = failedList[0]!.id;
const lib = uniq("lib"), libVictim = uniq("libv");
for (const l of [lib, libVictim]) await must("library", A.dev.post(`/codeadmin/v/2/library/${SK}/${l}`, { code: `function ${l}() { return 1; }`, dependencies: "", description: "d", api: "", visibility: "system" }));

const trig = uniq("trig"), trigVictim = uniq("trigv"), timer = uniq("tmr"), timerVictim = uniq("tmrv");
for (const n of [trig, trigVictim]) await must("trigger", A.dev.post(`/admin/triggers/handlers/${SK}/${n}`, { def_module: "Data", def_name: "ItemCreated", key_value_pairs: { collectionName: colName }, service_name: svc }));
for (const n of [timer, timerVictim]) await must("timer", A.dev.post(`/admin/triggers/timers/${SK}/${n}`, { frequency: 3600, repeats: -1, start_time: new Date(Date.now() + 3600_000).toISOString(), service_name: svc }));

const edge = uniq("edge"), edgeVictim = uniq("edgev");
for (const e of [edge, edgeVictim]) await must("edge", A.dev.post(`/admin/edges/${SK}/${e}`, { description: "matrix edge" }));
const ecol = uniq("ecol"), ecolVictim = uniq("ecolv");
for (const c of [ecol, ecolVictim]) await must("edge column", A.dev.post(`/admin/edges/${SK}/columns`, { column_name: c, type: "string" }));

const hook = uniq("hook"), hookVictim = uniq("hookv");
for (const h of [hook, hookVictim]) await must("webhook", A.dev.post(`/admin/v/4/webhook/${SK}/${h}`, { service_name: svc, auth_method: "platform_auth", description: "matrix" }));

const THR = "HTTP Requests";
const kase = uniq("case"), kaseVictim = uniq("casev");
for (const c of [kase, kaseVictim]) await must("throttle case", A.dev.post(`/admin/throttlers/${encodeURIComponent(THR)}/cases`, { case_name: c, system_key: SK, consumer: "*", resource: "/nowhere", limiter_type: "frequency", max_num: -1, duration: 60, priority: 50 }));

const adapter = uniq("adp"), adapterVictim = uniq("adpv"), file = uniq("file"), fileVictim = uniq("filev");
for (const a of [adapter, adapterVictim]) await must("adapter", A.dev.post(`/admin/${SK}/adaptors`, { name: a, description: "matrix", start_command: "./run.sh" }));
for (const f of [file, fileVictim]) await must("adapter file", A.dev.post(`/admin/${SK}/adaptors/${adapter}/files`, { name: f, path_name: `bin/${f}.sh`, permissions: "0755", file: Buffer.from("echo hi\n").toString("base64") }));

// External databases: the real PostgreSQL of scripts/test-databases.sh when it is there (then
// data operations and a connection collection run for real), else an address nothing listens at.
const PG = new URL(process.env.OUTPOST_TEST_PG ?? "postgres://outpost:outpost-test-pw@127.0.0.1:5432/outpost_test");
const PG_UP = await canConnect(Number(PG.port), PG.hostname);
const pgCreds = PG_UP
  ? { user: decodeURIComponent(PG.username), password: decodeURIComponent(PG.password), address: PG.hostname, port: PG.port, dbname: PG.pathname.slice(1) }
  : { user: "u", password: "p", address: "127.0.0.1", port: "1", dbname: "d" };
if (!PG_UP) t.comment(`PostgreSQL (${PG.host}) is not there: external databases are tested without a server, connection collections not at all`);
const cache = uniq("cache"), cacheVictim = uniq("cachev");
for (const c of [cache, cacheVictim]) await must("service cache", A.dev.post(`/admin/v/4/service_caches/${SK}/${c}`, { ttl: 60, description: "matrix" }));
const portal = uniq("portal"), portalVictim = uniq("portalv"), plugin = uniq("plugin"), pluginVictim = uniq("pluginv");
for (const p of [portal, portalVictim]) await must("portal", A.dev.post(`/api/v/2/portals/${SK}/${p}`, { description: "matrix", config: {} }));
for (const p of [plugin, pluginVictim]) await must("plugin", A.dev.post(`/api/v/2/plugins/${SK}`, { name: p, description: "matrix", config: {} }));
const deployment = uniq("dep"), deploymentVictim = uniq("depv");
for (const d of [deployment, deploymentVictim]) await must("deployment", A.dev.post(`/admin/${SK}/deployments`, { name: d, description: "matrix", assets: [{ asset_class: "services", asset_id: svc, sync_to_edge: true, sync_to_platform: false }], edges: [edge] }));
// a bucket set with files (one to read and copy, one to move away, one to delete), a file store with files
const bucketSet = uniq("set"), bucketSetVictim = uniq("setv");
for (const b of [bucketSet, bucketSetVictim]) await must("bucket set", A.dev.post(`/api/v/4/bucket_sets/${SK}`, { name: b, platform_storage: "local", edge_storage: "local", platform_config: {}, edge_config: {} }));
const setFile = `files/${uniq("f")}.txt`, setMoveFile = `files/${uniq("fm")}.txt`, setFileVictim = `files/${uniq("fv")}.txt`;
for (const f of [setFile, setMoveFile, setFileVictim]) await must("bucket set file", A.dev.post(`/api/v/4/bucket_sets/${SK}/${bucketSet}/file/create`, { box: "sandbox", path: f, contents: Buffer.from("matrix file").toString("base64") }));
const fileStore = uniq("store"), fileStoreVictim = uniq("storev");
for (const f of [fileStore, fileStoreVictim]) await must("file store", A.dev.post(`/api/v/1/filestore/${SK}`, { name: f, storage_type: "local", read_auth_method: "clearblade_auth", write_auth_method: "clearblade_auth" }));
const storeFile = `dir/${uniq("sf")}.txt`, storeFileVictim = `dir/${uniq("sfv")}.txt`;
for (const f of [storeFile, storeFileVictim]) await must("file store file", request(o.url, "PUT", `/api/v/1/filestore/${SK}/${fileStore}/file/${f}`, { headers: { ...devToken(A.devToken), "Content-Type": "application/octet-stream" }, body: "matrix bytes" }));
// user secrets whose values carry the row secret: no answer to system B may show them
const usecret = uniq("usecret"), usecretVictim = uniq("usecretv");
for (const u of [usecret, usecretVictim]) await must("user secret", A.dev.post(`/api/v/4/user_secrets/${SK}/${u}`, { value: `${ROW_SECRET}-usersecret` }));
// the instance's email and SMS services, so their GETs read a real record (nothing listens there)
const asAdmin = { "ClearBlade-DevToken": adminToken };
await must("email service", request(o.url, "POST", "/admin/settings/email-service", { headers: asAdmin, body: { host: "127.0.0.1", port: "2525", from: "outpost@example.com", protocol: "SMTP", encryption_type: "NONE" } }));
await must("SMS service", request(o.url, "POST", "/admin/settings/sms-service", { headers: asAdmin, body: { url: "http://127.0.0.1:1/sms", from: "Outpost" } }));
const db = uniq("db"), dbVictim = uniq("dbv");
for (const d of [db, dbVictim]) await must("external db", A.dev.post(`/api/v/4/external-db/${SK}`, { name: d, db_type: "postgres", credentials: pgCreds }));
let connCol = "";
if (PG_UP) {
  const tbl = uniq("conn").toLowerCase();
  await must("external table", A.dev.post(`/api/v/4/external-db/${SK}/${db}/data`, { operation: [`create table ${tbl} (item_id varchar(40), s varchar(40), n int)`] }));
  await must("external row", A.dev.post(`/api/v/4/external-db/${SK}/${db}/data`, { operation: [`insert into ${tbl} values ('r0', '${ROW_SECRET}-conn', 1)`] }));
  connCol = (await must("connection collection", A.dev.post("/admin/collectionmanagement", { name: uniq("conncol"), appID: SK, dbtype: "postgres", ...pgCreds, tablename: tbl }))).collectionID as string;
}

const ids: Ids = {
  sk: SK, secret: A.systemSecret, skC, skVictim,
  userA: userA.userId, userTarget: target.userId, userTargetEmail: target.email, userDel1: del1.userId, userDel2: del2.userId,
  selfUserPassword: selfUser.password, selfUserEmail: selfUser.email,
  ucol, ucolVictim, role, roleVictim, col, colName, colVictim,
  device, deviceVictim, deviceAuth, deviceKey, dcol, dcolVictim, topic,
  svc, svcVictim, failId, lib, libVictim, trig, trigVictim, timer, timerVictim,
  edge, edgeVictim, ecol, ecolVictim, hook, hookVictim, thr: THR, kase, kaseVictim,
  adapter, adapterVictim, file, fileVictim, db, dbVictim, connCol, cache, cacheVictim, portal, portalVictim, plugin, pluginVictim,
  deployment, deploymentVictim, bucketSet, bucketSetVictim, setFile, setMoveFile, setFileVictim, fileStore, fileStoreVictim, storeFile, storeFileVictim,
  selfDevEmail, selfDevPassword, resetDevEmail, userAEmail: userA.email, userAPassword: userA.password,
  usecret, usecretVictim,
};
/** Data of system A that no answer to a caller of system B may contain, error or not. */
const A_SECRETS = [ROW_SECRET, MSG_SECRET, userA.email, adminUserA.email, target.email];
/** Things of system A that a 200 answer to a caller of system B must never contain. */
const A_MARKERS = [ROW_SECRET, MSG_SECRET, userA.email, adminUserA.email, target.email, colName, device, edge, svc, hook, adapter, db, lib, kase, deployment, bucketSet, fileStore, SK];

// ---- callers --------------------------------------------------------------------------------

const OWNER: Record<Owner, Record<string, string>> = {
  devA: devToken(A.devToken), adminUserA: userToken(adminUserAToken), selfUser: userToken(selfUser.token),
  selfDev: devToken(selfDevToken), admin: devToken(adminToken), anon: {},
};

type Expect = "unauth" | "cross" | "notForUsers" | "loggedOut";
interface Variant { tag: string; who: string; headers: Record<string, string>; expect: Expect }
const V: Record<string, Variant> = {
  none: { tag: "(a)", who: "no token", headers: {}, expect: "unauth" },
  devB: { tag: "(b)", who: "dev token of developer B", headers: devToken(B.devToken), expect: "cross" },
  userB: { tag: "(b)", who: "user token of system B (Administrator there)", headers: userToken(userBToken), expect: "cross" },
  deviceB: { tag: "(b)", who: "device token of system B (Administrator there)", headers: deviceToken(deviceBToken), expect: "cross" },
  anonB: { tag: "(b)", who: "anonymous token of system B", headers: userToken(anonB), expect: "cross" },
  userA: { tag: "(c)", who: "user token of system A (Authenticated)", headers: userToken(userA.token), expect: "notForUsers" },
  anonA: { tag: "(c)", who: "anonymous token of system A", headers: userToken(anonA), expect: "notForUsers" },
  plainDev: { tag: "(c)", who: "dev token of A's developer (not the platform admin)", headers: devToken(A.devToken), expect: "notForUsers" },
  devOut: { tag: "(d)", who: "logged-out dev token of A's developer", headers: devToken(devOut), expect: "loggedOut" },
  userOut: { tag: "(d)", who: "logged-out user token of system A", headers: userToken(userOut), expect: "loggedOut" },
  forged: { tag: "(d)", who: "forged token", headers: userToken(FORGED), expect: "loggedOut" },
  refreshUser: { tag: "(d)", who: "refresh token of A's Administrator user as an access token", headers: userToken(refreshUser), expect: "loggedOut" },
  refreshDev: { tag: "(d)", who: "refresh token of A's developer as an access token", headers: devToken(refreshDev), expect: "loggedOut" },
  secret: { tag: "(d)", who: "system A's secret as a token", headers: userToken(A.systemSecret), expect: "loggedOut" },
};
const VARIANTS: Record<Auth, (keyof typeof V)[]> = {
  public: [],
  any: ["none", "devOut", "userOut", "forged", "refreshUser", "refreshDev", "secret"],
  self: ["none", "userOut", "forged", "refreshUser", "secret"],
  devself: ["none", "userA", "anonA", "devOut", "userOut", "forged", "refreshDev", "secret"],
  admin: ["none", "userA", "anonA", "plainDev", "devOut", "forged", "refreshDev"],
  dev: ["none", "devB", "userB", "deviceB", "anonB", "userA", "anonA", "devOut", "userOut", "forged", "refreshUser", "refreshDev", "secret"],
  user: ["none", "devB", "userB", "deviceB", "anonB", "devOut", "userOut", "forged", "refreshUser", "refreshDev", "secret"],
  hook: ["none", "devB", "userB", "deviceB", "anonB", "userOut", "forged", "refreshUser", "secret"],
};

// ---- requests and checks --------------------------------------------------------------------

interface Case {
  route: Route;
  /** what is being tried, e.g. "(b) dev token of developer B" or "body: malformed JSON" */
  what: string;
  headersKind: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
  bodyLabel?: string;
  check(r: HttpResponse): string | null;
}
interface Failure { file: string; route: string; method: string; path: string; headers: string; what: string; body?: string; status: number; got: string; why: string }
const failures: Failure[] = [];
let sent = 0;

async function send(c: { method: string; path: string; headers: Record<string, string>; body?: string }): Promise<HttpResponse> {
  sent++;
  const headers = c.body !== undefined ? { "content-type": "application/json", ...c.headers } : c.headers;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<HttpResponse>((res) => { timer = setTimeout(() => res({ status: 0, headers: {}, text: "no answer within 20 s", body: null }), 20_000); });
  try {
    return await Promise.race([request(o.url, c.method, c.path, { headers, body: c.body }), timeout]);
  } catch (e) {
    return { status: 0, headers: {}, text: `request failed: ${(e as Error).message}`, body: null };
  } finally { clearTimeout(timer); }
}

async function pool<T, R>(items: T[], n: number, fn: (x: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, async () => {
    while (next < items.length) { const i = next++; out[i] = await fn(items[i]!); }
  }));
  return out;
}

const LEAKS: [RegExp, string][] = [
  [/SQLITE|no such (table|column)|syntax error/i, "SQL text"],
  [/\bSELECT |\bINSERT /, "SQL text"],
  [/\/(work|tmp|root|home|usr)\//, "a file path"],
  [/\.ts:\d+/, "a source line reference"],
  [/node_modules|\\n\s+at |\bat [\w.$<>]+ \(/, "a stack trace"],
];
/** Problems every answer must be free of: a 5xx, a missing answer, leaked internals, an error
 *  that is not the envelope. */
function basic(r: HttpResponse): string | null {
  if (r.status === 0) return r.text;
  if (r.status >= 500) return `a ${r.status}`;
  for (const [re, what] of LEAKS) if (re.test(r.text)) return `the answer contains ${what} (${re.exec(r.text)![0]})`;
  if (r.status >= 400 && !isEnvelope(r.body, r.status)) return "an error that is not the error envelope";
  return null;
}
const errIn = (allowed: number[]) => (r: HttpResponse) => basic(r) ?? (allowed.includes(r.status) ? null : `expected ${allowed.join("/")}`);
const any4xx = (r: HttpResponse) => basic(r) ?? (r.status >= 400 && r.status < 500 ? null : "expected a 4xx error");
const okish = (r: HttpResponse) => basic(r) ?? (r.status >= 200 && r.status < 300 ? null : "expected a 2xx");

function authCheck(route: Route, v: Variant): (r: HttpResponse) => string | null {
  switch (v.expect) {
    case "unauth": return errIn([401, 403]);
    case "notForUsers": return errIn([401, 403]);
    case "loggedOut": return (r) => basic(r) ?? ([401, 403].includes(r.status) || (r.status === 400 && r.body?.error?.code === 204) ? null : "expected 401/403 (or 400 with the invalid-token code 204)");
    case "cross": return (r) => {
      const b = basic(r);
      if (b) return b;
      if ([401, 403, 404, ...(route.crossAlso ?? [])].includes(r.status)) return null;
      // a token that names its own system may act there, as long as nothing of A shows
      const own = (route.ownSystem && v.headers["ClearBlade-DevToken"] === undefined) || route.ownScope;
      if (own && r.status >= 200 && r.status < 300) {
        const seen = A_MARKERS.find((m) => r.text.includes(m));
        return seen ? `answered with system A's data ('${seen}')` : null;
      }
      return `expected 401/403/404${route.crossAlso ? `/${route.crossAlso.join("/")}` : ""}`;
    };
  }
}

const routeKey = (r: Route) => `${r.method} ${r.path}`;
const sysHeaders = (r: Route): Record<string, string> => (r.sysHeader ? keyHeaders(A) : {});
const ownerOf = (r: Route) => ({ ...sysHeaders(r), ...OWNER[r.as ?? "devA"] });
const ownerKind = (r: Route) => `${r.as ?? "devA"} (valid)${r.sysHeader ? " + A's key/secret" : ""}`;

function authCases(route: Route): Case[] {
  const kinds = [...VARIANTS[route.auth], ...(route.ownScope && !VARIANTS[route.auth].includes("devB") ? ["devB" as const] : [])];
  return kinds.map((k) => {
    const v = V[k]!;
    const body = route.body ? JSON.stringify(route.body(ids, fresh)) : undefined;
    return {
      route, what: `${v.tag} ${v.who}`, headersKind: `${v.who}${route.sysHeader ? " + A's key/secret" : ""}`,
      method: route.method, path: fill(route.path, ids, fresh), headers: { ...sysHeaders(route), ...v.headers },
      body, bodyLabel: body === undefined ? undefined : "the sample body", check: authCheck(route, v),
    };
  });
}

// ---- bodies ---------------------------------------------------------------------------------

const DEPTH = 10_000;
const DEEP_OBJECT = '{"a":'.repeat(DEPTH) + "1" + "}".repeat(DEPTH);
const DEEP_ARRAY = "[".repeat(DEPTH) + "]".repeat(DEPTH);
const PROTO = '"__proto__":{"polluted":"yes"}';
const CTOR = '"constructor":{"prototype":{"polluted":"yes"}}';
const MARK = "__matrix_mark__";

/** JSON text of `value` with the marker key (`"__matrix_mark__":0`) replaced by raw text. */
function withRaw(value: unknown, raw: string): string {
  const text = JSON.stringify(value);
  return text.replace(`"${MARK}":0,`, raw ? `${raw},` : "").replace(`"${MARK}":0`, raw);
}
/** The object the fuzzing works on: the body itself, or the element of an array body. */
const elementOf = (route: Route, body: unknown) => (route.shape === "array" ? (body as Record<string, unknown>[])[0]! : body) as Record<string, unknown>;
const wrap = (route: Route, el: unknown) => (route.shape === "array" ? [el] : el);

function wrongValues(v: unknown): [string, string][] {
  if (v === null || v === undefined) return [];
  // (not a string: a single item in place of a list is a common leniency, e.g. failed-run ids)
  if (Array.isArray(v)) return [["an object", '{"x":1}'], ["a number", "12345"]];
  if (typeof v === "object") return [["a string", '"str"'], ["a number", "12345"], ["an array", "[1,2]"], ["null", "null"]];
  if (typeof v === "string") return [["an object", '{"x":1}'], ["an array", '["x"]']];
  return [["an object", '{"x":1}'], ["a string", '"str"']];
}

function bodyCases(route: Route): Case[] {
  if (!route.body) return [];
  const out: Case[] = [];
  const free = route.shape === "free";
  const add = (bodyLabel: string, body: string | undefined, check = free ? basic : any4xx) => out.push({
    route, what: `body: ${bodyLabel}`, headersKind: ownerKind(route), method: route.method, path: fill(route.path, ids, fresh),
    headers: ownerOf(route), body, bodyLabel, check,
  });
  const sample = () => route.body!(ids, fresh);

  add("malformed JSON (truncated)", '{"a":');
  add("malformed JSON (trailing comma)", '{"a":1,}');
  add("malformed JSON (single quotes)", "{'a': 1}");
  add(`a ${DEPTH}-deep object`, DEEP_OBJECT);
  add(`a ${DEPTH}-deep array`, DEEP_ARRAY);
  if (route.bodyRequired) add("no body at all", undefined);
  if (free) {
    // free keys: 'constructor' is a name like any other there; '__proto__' is refused everywhere
    add("an own __proto__ key", `{${PROTO}}`);
    return out;
  }

  const wholeWrong: Record<string, string[]> = {
    object: ["[]", "[1,2]", "123", '"str"', "null", "true"],
    either: ["123", '"str"', "null", "true", "[1,2]", "[[]]", "[null]"],
    array: ['{"x":1}', "123", '"str"', "null", "true", "[1,2]", "[null]"],
  };
  // (null parameters are what the Go SDK sends for a nil map: accepted as none)
  for (const w of wholeWrong[route.shape ?? "object"]!) if (!(route.open && w === "null")) add(`the whole body is ${w}`, w);

  const keys = Object.keys(elementOf(route, sample()));
  for (const k of route.open ? [] : keys.filter((k) => !route.anyType?.includes(k))) {
    for (const [label, raw] of wrongValues(elementOf(route, sample())[k])) {
      if (raw === "null" && route.nullable?.includes(k)) continue;
      const el = { ...elementOf(route, sample()), [k]: MARK };
      add(`field '${k}' is ${label}`, JSON.stringify(wrap(route, el)).replace(`"${MARK}"`, raw));
    }
  }
  if (keys.length) {
    const el = { ...elementOf(route, sample()), [keys[0]!]: MARK };
    add(`field '${keys[0]}' is a ${DEPTH}-deep object`, JSON.stringify(wrap(route, el)).replace(`"${MARK}"`, DEEP_OBJECT));
  }
  if (!route.open && !route.extraFields) add("an unknown field", JSON.stringify(wrap(route, { ...elementOf(route, sample()), zz_matrix_unknown: 1 })));
  add("an own __proto__ key", withRaw(wrap(route, { [MARK]: 0, ...elementOf(route, sample()) }), PROTO));
  // a field named 'constructor' is an unknown field: only where unknown fields are refused
  if (!route.open && !route.extraFields) add("an own constructor key", withRaw(wrap(route, { [MARK]: 0, ...elementOf(route, sample()) }), CTOR));
  for (const k of keys) {
    const v = elementOf(route, sample())[k];
    if (!v || typeof v !== "object" || Array.isArray(v)) continue;
    const el = { ...elementOf(route, sample()), [k]: { [MARK]: 0, ...(v as object) } };
    add(`an own __proto__ key inside '${k}'`, withRaw(wrap(route, el), PROTO));
  }
  if (route.columns !== undefined) {
    for (const name of ["constructor", "__proto__", "toString", "hasOwnProperty"]) {
      const el = elementOf(route, sample());
      const withCol = route.columns === "" ? { [MARK]: 0, ...el } : { ...el, [route.columns]: { [MARK]: 0, ...(el[route.columns] as object) } };
      add(`a custom column named '${name}'`, withRaw(wrap(route, withCol), `"${name}":"x"`));
    }
  }
  return out;
}

// ---- query parameters ------------------------------------------------------------------------

const DEEP_QUERY = '{"FILTERS":'.concat("[".repeat(1000), "]".repeat(1000), "}");
/** The query cases; `ignorable` names the route kinds that may ignore the key (answer 2xx), as
 *  long as the answer is clean: a count neither pages, sorts nor selects; roles, topics and failed
 *  runs have no SELECTCOLUMNS in their query structure. */
const PAGING = ["count"], SORTING = ["count"], SELECTING = ["count", "meta"];
const QUERIES: [string, string, string[]?][] = [
  ["malformed JSON", '{"FILTERS":'],
  ["a number", "12345"],
  ["a string", '"str"'],
  ["true", "true"],
  ["an array of numbers", "[1,2]"],
  ["PAGENUM 1e20", JSON.stringify({ PAGESIZE: 10, PAGENUM: 1e20 }), PAGING],
  ["PAGESIZE 1e20", JSON.stringify({ PAGESIZE: 1e20, PAGENUM: 1 }), PAGING],
  ["PAGESIZE and PAGENUM 1e308", JSON.stringify({ PAGESIZE: 1e308, PAGENUM: 1e308 }), PAGING],
  ["PAGESIZE -1", JSON.stringify({ PAGESIZE: -1, PAGENUM: 1 }), PAGING],
  ["PAGENUM -5", JSON.stringify({ PAGESIZE: 10, PAGENUM: -5 }), PAGING],
  ["PAGESIZE 1.5", JSON.stringify({ PAGESIZE: 1.5, PAGENUM: 1 }), PAGING],
  ["PAGESIZE a string", JSON.stringify({ PAGESIZE: "ten", PAGENUM: 1 }), PAGING],
  ["PAGENUM an object", JSON.stringify({ PAGESIZE: 10, PAGENUM: { x: 1 } }), PAGING],
  ["FILTERS a string", JSON.stringify({ FILTERS: "x" })],
  ["an operator that is not an array", JSON.stringify({ FILTERS: [[{ EQ: "x" }]] })],
  ["an unknown operator", JSON.stringify({ FILTERS: [[{ XX: [{ name: 1 }] }]] })],
  ["a filter on an unknown column", JSON.stringify({ FILTERS: [[{ EQ: [{ nosuchcolumn: 1 }] }]] })],
  ["a filter column with SQL in it", JSON.stringify({ FILTERS: [[{ EQ: [{ 'name" OR 1=1 --': 1 }] }]] })],
  ["a SORT column with SQL in it", JSON.stringify({ SORT: [{ ASC: "name; DROP TABLE users" }] }), SORTING],
  ["SELECTCOLUMNS with SQL in it", JSON.stringify({ SELECTCOLUMNS: ["* FROM users --"] }), SELECTING],
  ["PAGEAFTER that is not a position", JSON.stringify({ PAGESIZE: 10, PAGEAFTER: [{ x: 1 }] })],
  ["an own __proto__ key", '{"__proto__":{"PAGESIZE":1},"FILTERS":[]}'],
  ["1000-deep FILTERS", DEEP_QUERY],
];

function queryCases(route: Route): Case[] {
  if (!route.query) return [];
  const kind = route.query;
  return QUERIES.map(([label, q, ignorable]) => {
    const path = fill(route.path, ids, fresh);
    return {
      route, what: `query: ${label}`, headersKind: ownerKind(route), method: route.method,
      path: `${path}${path.includes("?") ? "&" : "?"}query=${encodeURIComponent(q)}`, headers: ownerOf(route), bodyLabel: `?query=${q.length > 80 ? `${q.slice(0, 60)}... (${q.length} chars)` : q}`,
      check: ignorable?.includes(kind) ? basic : any4xx,
    };
  });
}

// ---- running cases ---------------------------------------------------------------------------

const excerpt = (s: string | undefined, n = 160) => (s === undefined ? undefined : s.length > n ? `${s.slice(0, n)}... (${s.length} chars)` : s);

async function run(t: Test, name: string, cases: Case[]) {
  const results = await pool(cases, CONCURRENCY, send);
  const byRoute = new Map<string, [Case, HttpResponse][]>();
  cases.forEach((c, i) => {
    const k = routeKey(c.route);
    if (!byRoute.has(k)) byRoute.set(k, []);
    byRoute.get(k)!.push([c, results[i]!]);
  });
  await t.test(name, async (t) => {
    for (const [k, list] of byRoute) {
      t.test(k, async (t) => {
        for (const [c, r] of list) {
          const why = c.check(r);
          if (why) {
            failures.push({ file: c.route.file, route: k, method: c.method, path: c.path.length > 300 ? `${c.path.slice(0, 200)}...` : c.path, headers: c.headersKind, what: c.what, body: excerpt(c.body ?? c.bodyLabel), status: r.status, got: r.text.slice(0, 300), why });
          }
          t.ok(!why, `${c.what} [${c.headersKind}]${why ? ` -> ${why}; got ${r.status} ${r.text.slice(0, 200)}${c.body !== undefined ? `; body sent: ${excerpt(c.body, 120)}` : ""}` : ""}`);
        }
      });
    }
  });
}

// ---- what must not change ---------------------------------------------------------------------

const VOLATILE = /^(last_active_date|last_talked|first_talked|isConnected|sync_lag|last_seen_\w+|last_login|expires_at|time_connected|connections|token|cb_token|dev_token|user_token|refresh_token)$/;
function normalize(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(normalize);
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).filter(([k]) => !VOLATILE.test(k)).map(([k, x]) => [k, normalize(x)]));
  return v;
}
interface Snap { label: string; as?: Owner; keys?: boolean; method?: string; path: string; body?: unknown; statusOnly?: boolean }
const SNAPSHOTS: Record<string, Snap[]> = {
  "developer.ts": [
    { label: "the self developer's info", as: "selfDev", path: "/admin/userinfo" },
    { label: "the reset target can still sign in", as: "anon", method: "POST", path: "/admin/auth", body: { email: resetDevEmail, password: "reset-dev-pw-1" }, statusOnly: true },
    { label: "A's developer can still sign in", as: "anon", method: "POST", path: "/admin/auth", body: { email: A.email, password: A.password }, statusOnly: true },
  ],
  "systems.ts": [
    { label: "system A", path: `/admin/systemmanagement?id=${SK}` },
    { label: "system C (secret)", path: `/admin/systemmanagement?id=${skC}` },
    { label: "the victim system", path: `/admin/systemmanagement?id=${skVictim}` },
    { label: "A's developer's systems", path: "/admin/allsystems" },
  ],
  "users.ts": [
    { label: "A's users", path: `/admin/user/${SK}` },
    { label: "A's user columns", path: `/admin/user/${SK}/columns` },
    { label: "A's user can still sign in", as: "anon", keys: true, method: "POST", path: "/api/v/1/user/auth", body: { email: userA.email, password: userA.password }, statusOnly: true },
    { label: "the self user can still sign in", as: "anon", keys: true, method: "POST", path: "/api/v/1/user/auth", body: { email: selfUser.email, password: selfUser.password }, statusOnly: true },
  ],
  "roles.ts": [{ label: "A's roles", path: `/admin/user/${SK}/roles` }],
  "data.ts": [
    { label: "A's collections", path: `/admin/allcollections?appid=${SK}` },
    { label: "A's rows", path: `/api/v/1/data/${col}?query=${qs({ PAGESIZE: 0, PAGENUM: 0 })}` },
    { label: "A's columns", path: `/api/v/1/data/${col}/columns` },
    { label: "A's indexes", path: `/api/v/4/data/${col}/listindexes` },
    { label: "the victim collection", path: `/admin/collectionmanagement?id=${colVictim}` },
    ...(PG_UP ? [{ label: "the connection collection's rows", path: `/api/v/1/data/${connCol}` }] : []),
  ],
  "devices.ts": [
    { label: "A's devices", path: `/admin/devices/${SK}` },
    { label: "A's device columns", path: `/admin/devices/${SK}/columns` },
    { label: "the device's keys", path: `/admin/devices/keys/${SK}/${device}` },
    { label: "the device's roles", path: `/admin/devices/roles/${SK}/${device}` },
  ],
  "messaging.ts": [
    { label: "A's history", path: `/api/v/1/message/${SK}?topic=${encodeURIComponent(topic)}&count=0` },
    { label: "A's storage settings", path: `/api/v/4/message/${SK}/storage` },
  ],
  "code.ts": [
    { label: "A's services", path: `/admin/code/v/1/${SK}` },
    { label: "the service", path: `/api/v/1/code/${SK}/${svc}` },
    { label: "A's libraries", path: `/codeadmin/v/2/library/${SK}` },
    { label: "A's failed runs", path: `/codeadmin/failed/${SK}` },
  ],
  "handlers.ts": [
    { label: "A's triggers", path: `/admin/triggers/handlers/${SK}` },
    { label: "A's timers", path: `/admin/triggers/timers/${SK}` },
  ],
  "edges.ts": [
    { label: "A's edges", path: `/admin/edges/${SK}` },
    { label: "A's edge columns", path: `/admin/edges/${SK}/columns` },
    { label: "A's edge templates", path: `/admin/edges/template/${SK}` },
  ],
  "webhooks.ts": [{ label: "A's webhooks", path: `/admin/v/4/webhook/${SK}` }],
  "throttlers.ts": [{ label: "the throttlers", path: "/admin/throttlers" }],
  "adapters.ts": [
    { label: "A's adapters", path: `/admin/${SK}/adaptors` },
    { label: "the adapter's files", path: `/admin/${SK}/adaptors/${adapter}/files` },
  ],
  "externalDbs.ts": [
    { label: "A's external databases", path: `/api/v/4/external-db/${SK}` },
    { label: "the external database", path: `/api/v/4/external-db/${SK}/${db}` },
  ],
  "serviceCaches.ts": [
    { label: "A's service caches", path: `/admin/v/4/service_caches/${SK}` },
    { label: "the service cache", path: `/admin/v/4/service_caches/${SK}/${cache}` },
  ],
  "deployments.ts": [
    { label: "A's deployments", path: `/admin/${SK}/deployments` },
    { label: "the deployment", path: `/admin/${SK}/deployments/${deployment}` },
  ],
  "files.ts": [
    { label: "A's bucket sets", path: `/api/v/4/bucket_sets/${SK}` },
    { label: "the bucket set's files", path: `/api/v/4/bucket_sets/${SK}/${bucketSet}/files` },
    { label: "A's file stores", path: `/api/v/1/filestore/${SK}` },
    { label: "the file store's files", path: `/api/v/1/filestore/${SK}/${fileStore}/list?depth=-1` },
  ],
};
async function snapshot(file: string): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const s of SNAPSHOTS[file] ?? []) {
    const r = await send({ method: s.method ?? "GET", path: s.path, headers: { ...OWNER[s.as ?? "devA"], ...(s.keys ? keyHeaders(A) : {}) }, body: s.body === undefined ? undefined : JSON.stringify(s.body) });
    out[s.label] = s.statusOnly ? r.status : { status: r.status, body: normalize(r.body) };
  }
  return out;
}

async function alive(t: Test, after: string) {
  const about = await send({ method: "GET", path: "/api/about", headers: {} });
  t.equal(about.status, 200, `after ${after}: GET /api/about answers 200`);
  t.notMatch(about.text, /polluted/, `after ${after}: nothing polluted shows`);
  const info = await send({ method: "GET", path: "/api/v/1/user/info", headers: userToken(userA.token) });
  t.equal(info.status, 200, `after ${after}: GET /api/v/1/user/info with a valid user token answers 200 (got ${info.status} ${info.text.slice(0, 120)})`);
  t.notMatch(info.text, /polluted/, `after ${after}: the user's info shows nothing polluted`);
  const dev = await send({ method: "GET", path: "/admin/userinfo", headers: devToken(A.devToken) });
  t.equal(dev.status, 200, `after ${after}: GET /admin/userinfo with A's dev token answers 200 (got ${dev.status})`);
}

// ---- the matrix ------------------------------------------------------------------------------

const ROUTES = routes({ pg: PG_UP });
const FILES = [...new Set(ROUTES.map((r) => r.file))];
// the throttlers last: a case wrongly accepted there could throttle what follows
FILES.sort((a, b) => Number(a === "throttlers.ts") - Number(b === "throttlers.ts"));

t.test("the route table covers every route file", async (t) => {
  const { readdirSync } = await import("node:fs");
  const dir = new URL("../../../src/http/routes/", import.meta.url);
  let files: string[] = [];
  try { files = readdirSync(dir).filter((f) => f.endsWith(".ts")); } catch { /* bundled elsewhere: the list below stands */ }
  for (const f of files) t.ok(FILES.includes(f), `routes of ${f} are in the table`);
  t.ok(ROUTES.length >= 200, `${ROUTES.length} routes in the table`);
});

t.test("cross-system calls on A's real resources are refused and change nothing", async (t) => {
  const callers: [string, Record<string, string>][] = [["developer B", devToken(B.devToken)], ["B's Administrator user", userToken(userBToken)], ["B's Administrator device", deviceToken(deviceBToken)]];
  for (const [who, h] of callers) {
    const read = await send({ method: "GET", path: `/api/v/1/data/${col}`, headers: h });
    t.ok([401, 403, 404].includes(read.status) && isEnvelope(read.body, read.status), `${who}: GET A's collection by id refused (got ${read.status} ${read.text.slice(0, 150)})`);
    t.notMatch(read.text, ROW_SECRET, `${who}: no row of A in the answer`);
    const hist = await send({ method: "GET", path: `/api/v/1/message/${SK}?topic=${encodeURIComponent(topic)}&count=0`, headers: h });
    t.ok([401, 403, 404].includes(hist.status) && isEnvelope(hist.body, hist.status), `${who}: GET A's message history refused (got ${hist.status} ${hist.text.slice(0, 150)})`);
    t.notMatch(hist.text, MSG_SECRET, `${who}: no message of A in the answer`);
    const status = await send({ method: "GET", path: `/admin/${SK}/sync/edge/status/${edge}`, headers: h });
    t.ok([401, 403, 404].includes(status.status) && isEnvelope(status.body, status.status), `${who}: GET A's edge sync status refused (got ${status.status} ${status.text.slice(0, 150)})`);
    const del = await send({ method: "DELETE", path: `/admin/user/${SK}?user=${target.userId}`, headers: h });
    t.ok([401, 403, 404].includes(del.status) && isEnvelope(del.body, del.status), `${who}: DELETE A's user refused (got ${del.status} ${del.text.slice(0, 150)})`);
    const delInfo = await send({ method: "DELETE", path: "/api/v/1/user/info", headers: { ...h, ...keyHeaders(A) }, body: JSON.stringify({ user_id: target.userId }) });
    t.ok(delInfo.status >= 400 && delInfo.status < 500 && isEnvelope(delInfo.body, delInfo.status), `${who}: DELETE /api/v/1/user/info of A's user with A's key and secret refused (got ${delInfo.status} ${delInfo.text.slice(0, 150)})`);
  }
  // a role of B naming A's collection by id grants nothing in A
  const grant = await must("B role naming A's collection", B.dev.post(`/admin/user/${B.systemKey}/roles`, { name: uniq("grabA"), collections: [{ itemInfo: { id: col }, permissions: 15 }], services: [{ itemInfo: { name: svc }, permissions: 15 }], topics: [{ itemInfo: { name: "#" }, permissions: 15 }] }));
  const grabber = await newUser(B);
  const grabberToken = await withRole(B, grabber.userId, grabber.email, grabber.password, grant.role_id as string);
  for (const [what, method, path, body] of [
    ["read A's collection by id", "GET", `/api/v/1/data/${col}`],
    ["write A's collection by id", "POST", `/api/v/1/data/${col}`, { s: "from B" }],
    ["count A's collection", "GET", `/api/v/1/data/${col}/count`],
    ["run A's service", "POST", `/api/v/1/code/${SK}/${svc}`, {}],
    ["publish into A", "POST", `/api/v/1/message/${SK}/publish`, { topic, body: "from B" }],
  ] as const) {
    const r = await send({ method, path, headers: userToken(grabberToken), body: body === undefined ? undefined : JSON.stringify(body) });
    t.ok([401, 403, 404].includes(r.status) && isEnvelope(r.body, r.status), `a user of B whose role names A's resources: ${what} refused (got ${r.status} ${r.text.slice(0, 150)})`);
    t.notMatch(r.text, ROW_SECRET, `a user of B whose role names A's resources: ${what}: nothing of A shows`);
  }
  // system listings of B's developer do not show A
  for (const p of ["/admin/allsystems", "/admin/allapps"]) {
    const r = await B.dev.get(p);
    t.equal(r.status, 200, `developer B: GET ${p}`);
    t.notMatch(r.text, SK, `developer B: GET ${p} does not list system A`);
  }
  // spellings of A's paths that might slip past the system check
  const tricks: [string, string][] = [
    ["GET", `/admin/user/${SK.toUpperCase()}`], ["GET", `/admin/user/${SK}/`], ["GET", `//admin//user//${SK}`], ["GET", `/admin/user/${SK}%20`],
    ["GET", `/admin/user/%20${SK}`], ["GET", `/admin/user/${SK}%00`], ["GET", `/api/v/1/data/${col.toUpperCase()}`], ["GET", `/api/v/1/data/${col}/`],
    ["GET", `//api/v/1/data/${col}`], ["GET", `/api/v/1/collection/${SK}/${colName.toUpperCase()}`], ["GET", `/api/v/1/collection/${SK.toUpperCase()}/${colName}`],
    ["GET", `/admin/devices/${SK}/${device}/`], ["GET", `/api/v/1/message/${SK.toUpperCase()}?topic=${encodeURIComponent(topic)}&count=0`],
    ["GET", `/admin/${SK.toUpperCase()}/sync/edge/status/${edge}`], ["DELETE", `/admin/user/${SK.toUpperCase()}?user=${target.userId}`],
  ];
  for (const [who, h] of callers) {
    for (const [method, path] of tricks) {
      const r = await send({ method, path, headers: h });
      const why = any4xx(r) ?? (A_SECRETS.some((m) => r.text.includes(m)) ? "shows system A's data" : null);
      t.ok(!why, `${who}: ${method} ${path.replace(SK, "{sk}").replace(SK.toUpperCase(), "{SK}")} refused${why ? ` -> ${why}; got ${r.status} ${r.text.slice(0, 150)}` : ""}`);
    }
  }

  const rows = await A.dev.get(`/api/v/1/data/${col}`);
  t.notOk(rows.body?.DATA?.some((x: any) => x.s === "from B"), "no row of B's user in A's collection");
  t.ok(rows.body?.DATA?.some((x: any) => x.s === ROW_SECRET), "A's row is still there");
  const hist = await A.dev.get(`/api/v/1/message/${SK}?topic=${encodeURIComponent(topic)}&count=0`);
  t.equal(Array.isArray(hist.body) ? hist.body.length : -1, 2, "A's history still has its two messages");
  const u = await A.dev.get(`/admin/user/${SK}?query=${qs({ FILTERS: [[{ EQ: [{ user_id: target.userId }] }]] })}`);
  t.equal(Array.isArray(u.body) ? u.body.length : -1, 1, "A's user still exists");
  t.equal((await A.dev.get(`/admin/edges/${SK}/${edge}`)).status, 200, "A's edge still exists");
});

t.test("the cases the issue names", async (t) => {
  const page = await send({ method: "GET", path: `/api/v/1/data/${col}?query=${qs({ PAGESIZE: 10, PAGENUM: 1e20 })}`, headers: devToken(A.devToken) });
  t.ok(page.status === 400 && isEnvelope(page.body, 400), `GET /api/v/1/data/{id} with PAGENUM 1e20 -> 400 (got ${page.status} ${page.text.slice(0, 200)})`);
  for (const [label, q] of [["PAGESIZE 1e20", { PAGESIZE: 1e20, PAGENUM: 1 }], ["PAGESIZE -1", { PAGESIZE: -1, PAGENUM: 1 }], ["PAGENUM -1", { PAGESIZE: 10, PAGENUM: -1 }], ["PAGENUM 1.5", { PAGESIZE: 10, PAGENUM: 1.5 }]] as const) {
    const r = await send({ method: "GET", path: `/api/v/1/data/${col}?query=${qs(q)}`, headers: devToken(A.devToken) });
    t.ok(r.status === 400 && isEnvelope(r.body, 400), `GET /api/v/1/data/{id} with ${label} -> 400 (got ${r.status} ${r.text.slice(0, 200)})`);
  }
  const before = (await A.dev.get(`/api/v/1/data/${col}/count`)).body?.count;
  const empty = await send({ method: "POST", path: `/api/v/1/data/${col}`, headers: devToken(A.devToken) });
  t.ok(empty.status === 400 && isEnvelope(empty.body, 400), `POST /api/v/1/data/{id} with no body -> 400 (got ${empty.status} ${empty.text.slice(0, 200)})`);
  t.equal((await A.dev.get(`/api/v/1/data/${col}/count`)).body?.count, before, "no empty row was made");
  for (const name of ["constructor", "__proto__", "toString", "hasOwnProperty"]) {
    const put = await send({ method: "PUT", path: `/api/v/1/data/${col}`, headers: devToken(A.devToken), body: `{"query":[],"$set":{"${name}":"x"}}` });
    t.ok(put.status === 400 && isEnvelope(put.body, 400), `PUT /api/v/1/data/{id} $set {${name}} -> 400 unknown column (got ${put.status} ${put.text.slice(0, 200)})`);
    const post = await send({ method: "POST", path: `/api/v/1/data/${col}`, headers: devToken(A.devToken), body: `{"s":"p","${name}":"x"}` });
    t.ok(post.status === 400 && isEnvelope(post.body, 400), `POST /api/v/1/data/{id} {${name}} -> 400 unknown column (got ${post.status} ${post.text.slice(0, 200)})`);
    const info = await send({ method: "PUT", path: "/api/v/1/user/info", headers: userToken(selfUser.token), body: `{"${name}":"x"}` });
    t.ok(info.status === 400 && isEnvelope(info.body, 400), `PUT /api/v/1/user/info {${name}} -> 400 unknown column (got ${info.status} ${info.text.slice(0, 200)})`);
    const dev = await send({ method: "PUT", path: `/api/v/2/devices/${SK}/${device}`, headers: devToken(A.devToken), body: `{"${name}":"x"}` });
    t.ok(dev.status === 400 && isEnvelope(dev.body, 400), `PUT /api/v/2/devices/{sk}/{name} {${name}} -> 400 unknown column (got ${dev.status} ${dev.text.slice(0, 200)})`);
    const edg = await send({ method: "PUT", path: `/admin/edges/${SK}/${edge}`, headers: devToken(A.devToken), body: `{"${name}":"x"}` });
    t.ok(edg.status === 400 && isEnvelope(edg.body, 400), `PUT /admin/edges/{sk}/{name} {${name}} -> 400 unknown column (got ${edg.status} ${edg.text.slice(0, 200)})`);
  }
  const cols = await A.dev.get(`/api/v/1/data/${col}/columns`);
  t.same(cols.body?.map((c: any) => c.ColumnName).sort(), ["item_id", "n", "s", "u"], "the collection's columns are unchanged");
});

for (const f of FILES) {
  t.test(f, async (t) => {
    const list = ROUTES.filter((r) => r.file === f);
    // every GET reaches its handler with the owner's token: the matrix aims at real resources
    await run(t, "baseline: the owner's GET answers 200", list.filter((r) => r.method === "GET" && r.auth !== "public").map((route) => ({
      route, what: "owner GET", headersKind: ownerKind(route), method: "GET", path: fill(route.path, ids, fresh), headers: ownerOf(route), check: okish,
    })));
    const before = await snapshot(f);
    for (const [label, v] of Object.entries(before)) t.equal(typeof v === "number" ? v : (v as { status: number }).status, 200, `${f}: the snapshot '${label}' reads a real resource`);
    await run(t, "auth: no token, other system's tokens, user tokens on developer routes, logged-out tokens", list.flatMap(authCases));
    t.same(await snapshot(f), before, `${f}: the resources the refused calls aimed at are unchanged`);
    await alive(t, `${f} auth`);
    await run(t, "bodies: malformed, wrong types, unknown fields, __proto__/constructor, deep documents", list.flatMap(bodyCases));
    await run(t, "query parameters: paging out of range, malformed and hostile queries", list.flatMap(queryCases));
    if (f === "messaging.ts") {
      const hp = (q: string) => `/api/v/1/message/${SK}?${q}`;
      const tp = `topic=${encodeURIComponent(topic)}`;
      const route = list.find((r) => r.method === "GET" && r.path.startsWith("/api/v/1/message/"))!;
      await run(t, "history parameters", ([
        ["count 1e20", `${tp}&count=1e20`], ["count -1", `${tp}&count=-1`], ["count abc", `${tp}&count=abc`], ["count 1.5", `${tp}&count=1.5`],
        ["last abc", `${tp}&count=0&last=abc`], ["start 1e400", `${tp}&count=0&start=1e400`], ["stop abc", `${tp}&count=0&stop=abc`], ["no topic", "count=0"],
      ] as const).map(([label, q]) => ({ route, what: `history: ${label}`, headersKind: "devA (valid)", method: "GET", path: hp(q), headers: OWNER.devA, check: any4xx })));
    }
    // the sample bodies are valid: the fuzzing above changed one thing of a body that works
    await run(t, "baseline: the owner's sample body is accepted", list.filter((r) => r.body && !r.noBaseline).map((route) => {
      const body = JSON.stringify(route.body!(ids, fresh));
      return { route, what: "owner sample body", headersKind: ownerKind(route), method: route.method, path: fill(route.path, ids, fresh), headers: ownerOf(route), body, bodyLabel: "the sample body", check: okish };
    }));
    await alive(t, `${f} bodies`);
  });
}

t.test("clean-up: the throttle cases made by the matrix", async (t) => {
  const r = await send({ method: "DELETE", path: `/admin/throttlers/${encodeURIComponent(THR)}`, headers: OWNER.admin });
  t.equal(r.status, 200, "cases cleared");
  await alive(t, "everything");
});
