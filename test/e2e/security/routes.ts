// The route table of the security matrix (matrix.test.ts): every route of src/http/routes/*.ts,
// with the kind of caller it is for and, where it reads a JSON body, a sample valid body. Path
// templates name real resources made in system A before the matrix runs ({col} is a collection
// id, {colName} its name, ...); {new} is a fresh name on every request (for create routes).

/** Who may call a route:
 *  - public: no token (registration, sign-in, device auth);
 *  - any: any valid token (no system in the path);
 *  - self: a user's own account (the system is the token's);
 *  - devself: a developer's own account or platform-wide developer operations (no system);
 *  - admin: the platform admin only;
 *  - dev: the developer of the system in the path;
 *  - user: any token of the system in the path, with role permissions;
 *  - hook: a webhook invocation (platform_auth: a user token of the system). */
export type Auth = "public" | "any" | "self" | "devself" | "admin" | "dev" | "user" | "hook";

/** The valid caller making the owner's requests (body fuzzing, baseline). */
export type Owner = "devA" | "adminUserA" | "selfUser" | "selfDev" | "admin" | "anon";

export interface Ids {
  sk: string; secret: string; skC: string; skVictim: string;
  userA: string; userTarget: string; userTargetEmail: string; userDel1: string; userDel2: string; selfUserPassword: string; selfUserEmail: string;
  ucol: string; ucolVictim: string;
  role: string; roleVictim: string;
  col: string; colName: string; colVictim: string;
  device: string; deviceVictim: string; deviceAuth: string; deviceKey: string; dcol: string; dcolVictim: string;
  topic: string;
  svc: string; svcVictim: string; failId: string; lib: string; libVictim: string;
  trig: string; trigVictim: string; timer: string; timerVictim: string;
  edge: string; edgeVictim: string; ecol: string; ecolVictim: string;
  hook: string; hookVictim: string;
  thr: string; kase: string; kaseVictim: string;
  adapter: string; adapterVictim: string; file: string; fileVictim: string;
  db: string; dbVictim: string; connCol: string;
  cache: string; cacheVictim: string;
  portal: string; portalVictim: string; plugin: string; pluginVictim: string;
  deployment: string; deploymentVictim: string;
  bucketSet: string; bucketSetVictim: string; setFile: string; setMoveFile: string; setFileVictim: string;
  fileStore: string; fileStoreVictim: string; storeFile: string; storeFileVictim: string;
  selfDevEmail: string; selfDevPassword: string; resetDevEmail: string;
  userAEmail: string; userAPassword: string;
  usecret: string; usecretVictim: string;
}

export interface Route {
  /** the file under src/http/routes that serves it */
  file: string;
  method: "GET" | "POST" | "PUT" | "DELETE" | "PATCH";
  path: string;
  auth: Auth;
  /** a sample valid body: the route reads a JSON body */
  body?: (ids: Ids, fresh: () => string) => unknown;
  /** what the body must be: an object (default), an array of objects, either, or anything (webhooks) */
  shape?: "object" | "array" | "either" | "free";
  /** the body's keys and values are free by the spec (code parameters): no unknown-field or
   *  field-type cases */
  open?: string;
  /** unknown fields are passed through by design (the reason): no unknown-field case */
  extraFields?: string;
  /** fields where null means "none" by design (SDKs send a nil map as null): no null case for them */
  nullable?: string[];
  /** fields that take any JSON value by design (a payload): no wrong-type cases for them */
  anyType?: string[];
  /** where the body holds column names ("" top level, "$set", "changes"): custom-column keys */
  columns?: "" | "$set" | "changes";
  /** the system comes from the ClearBlade-SystemKey/-SystemSecret headers (sent with every request) */
  sysHeader?: boolean;
  /** a user or device token of another system acts in its own system here (the token names the
   *  system): such an answer may be 200, but must not show anything of system A */
  ownSystem?: boolean;
  /** platform-wide listings and clears: a developer of another system may call them and acts on
   *  its own systems' things only (a 2xx that shows nothing of A and changes nothing of A) */
  ownScope?: boolean;
  /** statuses besides 401/403/404 a token of another system may get (checkauth: 400 by the spec) */
  crossAlso?: number[];
  /** the owner making the valid calls (default devA) */
  as?: Owner;
  /** takes a `query` URL parameter (fuzzed by the query matrix): a list, a count (which neither
   *  pages, sorts nor selects, so those keys may be ignored), or a list whose query structure (roles,
   *  topics; failed runs) has no SELECTCOLUMNS */
  query?: "list" | "count" | "meta";
  /** the sample is not sent as the owner (destructive, or answers an error by design) */
  noBaseline?: string;
  /** the body is required: no body at all must be a 400 */
  bodyRequired?: boolean;
}

const b64 = (s: string) => Buffer.from(s).toString("base64");
const FILTER_ALL: unknown[] = [];
const qs = (q: unknown) => encodeURIComponent(JSON.stringify(q));
const inAnHour = () => new Date(Date.now() + 3600_000).toISOString();

/** opts.pg: a PostgreSQL server is there (external databases and connection collections work) */
export function routes(opts: { pg: boolean }): Route[] {
  const R: Route[] = [];
  const add = (r: Route) => R.push(r);

  // ---- developer.ts --------------------------------------------------------------------------
  const dv = "developer.ts";
  add({ file: dv, method: "POST", path: "/admin/reg", auth: "public", as: "anon", body: (_i, f) => ({ email: `${f()}@example.com`, password: "pw-123456", fname: "F", lname: "L", org: "O" }) });
  add({ file: dv, method: "POST", path: "/admin/auth", auth: "public", as: "anon", body: (i) => ({ email: i.selfDevEmail, password: i.selfDevPassword }) });
  add({ file: dv, method: "POST", path: "/admin/logout", auth: "devself", noBaseline: "logs the caller out" });
  add({ file: dv, method: "POST", path: "/admin/checkauth", auth: "devself", as: "selfDev" });
  add({ file: dv, method: "GET", path: "/admin/userinfo", auth: "devself", as: "selfDev" });
  add({ file: dv, method: "PUT", path: "/admin/userinfo", auth: "devself", as: "selfDev", body: () => ({ fname: "Changed" }) });
  add({ file: dv, method: "PUT", path: "/admin/putpass", auth: "devself", as: "selfDev", body: (i) => ({ old_password: i.selfDevPassword, new_password: i.selfDevPassword }) });
  add({ file: dv, method: "POST", path: "/admin/resetpassword", auth: "admin", as: "admin", body: (i) => ({ email: i.resetDevEmail, password: "reset-pw-1" }) });
  add({ file: dv, method: "GET", path: "/admin/pkey", auth: "admin", as: "admin" });

  // ---- systems.ts ----------------------------------------------------------------------------
  const sy = "systems.ts";
  for (const base of ["/admin/systemmanagement", "/admin/v/4/systemmanagement"]) {
    add({ file: sy, method: "GET", path: `${base}?id={sk}`, auth: "dev" });
    add({ file: sy, method: "POST", path: base, auth: "devself", body: (_i, f) => ({ name: f(), description: "made by the matrix" }) });
    add({ file: sy, method: "PUT", path: base, auth: "dev", body: (i) => ({ id: i.skC, description: "changed by the owner" }) });
    add({ file: sy, method: "DELETE", path: `${base}?id={skVictim}`, auth: "dev", noBaseline: "deletes a system" });
  }
  add({ file: sy, method: "GET", path: "/admin/allapps", auth: "devself" });
  add({ file: sy, method: "GET", path: "/admin/allsystems", auth: "devself" });
  add({ file: sy, method: "PUT", path: "/admin/regensystemsecret", auth: "dev", body: (i) => ({ id: i.skC }) });

  // ---- users.ts ------------------------------------------------------------------------------
  const us = "users.ts";
  add({ file: us, method: "POST", path: "/api/v/1/user/reg", auth: "public", as: "anon", sysHeader: true, columns: "", body: (_i, f) => ({ email: `${f()}@example.com`, password: "pw-123456" }) });
  add({ file: us, method: "POST", path: "/api/v/1/user/auth", auth: "public", as: "anon", sysHeader: true, extraFields: "Go passes its extra options through", body: (i) => ({ email: i.userAEmail, password: i.userAPassword }) });
  add({ file: us, method: "POST", path: "/api/v/1/user/anon", auth: "public", as: "anon", sysHeader: true });
  add({ file: us, method: "POST", path: "/api/v/1/user/checkauth", auth: "self", as: "selfUser", sysHeader: true, crossAlso: [400] });
  add({ file: us, method: "POST", path: "/api/v/1/user/logout", auth: "self", noBaseline: "logs the caller out" });
  add({ file: us, method: "GET", path: "/api/v/1/user/info", auth: "self", as: "selfUser" });
  add({ file: us, method: "PUT", path: "/api/v/1/user/info", auth: "self", as: "selfUser", columns: "", body: (i) => ({ [i.ucol]: "self-changed" }) });
  add({ file: us, method: "POST", path: "/api/v/1/user/info", auth: "user", sysHeader: true, ownSystem: true, columns: "", body: (_i, f) => ({ email: `${f()}@example.com`, password: "pw-123456" }) });
  add({ file: us, method: "DELETE", path: "/api/v/1/user/info", auth: "user", sysHeader: true, ownSystem: true, body: (i) => ({ user_id: i.userDel2 }), noBaseline: "deletes a user" });
  add({ file: us, method: "PUT", path: "/api/v/2/user/info", auth: "user", sysHeader: true, ownSystem: true, columns: "changes", body: (i) => ({ query: [[{ EQ: [{ email: i.userTargetEmail }] }]], changes: { [i.ucol]: "v2-changed" } }) });
  add({ file: us, method: "PUT", path: "/api/v/1/user/pass", auth: "self", as: "selfUser", body: (i) => ({ old_password: i.selfUserPassword, new_password: i.selfUserPassword }) });
  add({ file: us, method: "PUT", path: "/api/v/4/user/manage", auth: "user", sysHeader: true, ownSystem: true, body: (i) => ({ user: i.userTarget, changes: { roles: { add: ["Authenticated"] } } }) });
  add({ file: us, method: "GET", path: "/api/v/1/user", auth: "user", sysHeader: true, ownSystem: true, query: "list" });
  add({ file: us, method: "GET", path: "/api/v/1/user/count", auth: "user", sysHeader: true, ownSystem: true, query: "count" });
  add({ file: us, method: "GET", path: "/api/v/1/user/columns", auth: "user", sysHeader: true, ownSystem: true });
  add({ file: us, method: "GET", path: "/admin/user/{sk}", auth: "dev", query: "list" });
  add({ file: us, method: "POST", path: "/admin/user/{sk}", auth: "dev", columns: "", body: (_i, f) => ({ email: `${f()}@example.com`, password: "pw-123456" }) });
  add({ file: us, method: "PUT", path: "/admin/user/{sk}", auth: "dev", columns: "changes", body: (i) => ({ user: i.userTarget, changes: { [i.ucol]: "admin-changed" } }) });
  add({ file: us, method: "DELETE", path: "/admin/user/{sk}?user={userDel1}", auth: "dev", noBaseline: "deletes a user" });
  add({ file: us, method: "GET", path: "/admin/user/{sk}/count", auth: "dev", query: "count" });
  add({ file: us, method: "GET", path: "/admin/user/{sk}/columns", auth: "dev" });
  add({ file: us, method: "POST", path: "/admin/user/{sk}/columns", auth: "dev", body: (_i, f) => ({ column_name: f(), type: "string" }) });
  add({ file: us, method: "DELETE", path: "/admin/user/{sk}/columns?column={ucolVictim}", auth: "dev", noBaseline: "deletes a column" });

  // ---- roles.ts ------------------------------------------------------------------------------
  const ro = "roles.ts";
  for (const [base, auth] of [["/admin/user/{sk}/roles", "dev"], ["/api/v/3/user/roles/{sk}", "user"]] as const) {
    add({ file: ro, method: "GET", path: base, auth, query: "meta" });
    add({ file: ro, method: "POST", path: base, auth, body: (_i, f) => ({ name: f(), description: "matrix role", collections: [], topics: [], services: [] }) });
    add({ file: ro, method: "PUT", path: base, auth, body: (i) => ({ id: i.role, changes: { description: "changed" } }) });
    add({ file: ro, method: "DELETE", path: `${base}?role={roleVictim}`, auth, noBaseline: "deletes a role" });
    add({ file: ro, method: "GET", path: `${base}/count`, auth, query: "count" });
  }

  // ---- data.ts -------------------------------------------------------------------------------
  const da = "data.ts";
  for (const [base, auth, sysHeader] of [["/api/v/3/collectionmanagement", "user", true], ["/admin/collectionmanagement", "dev", false]] as const) {
    add({ file: da, method: "GET", path: `${base}?id={col}`, auth });
    add({ file: da, method: "POST", path: base, auth, sysHeader, ownSystem: sysHeader || undefined, body: (i, f) => ({ name: f(), appID: i.sk }) });
    add({ file: da, method: "PUT", path: base, auth, body: (i, f) => ({ id: i.col, addColumn: { name: f(), type: "string" } }) });
    add({ file: da, method: "DELETE", path: `${base}?id={colVictim}`, auth, noBaseline: "deletes a collection" });
  }
  add({ file: da, method: "GET", path: "/api/v/3/allcollections/{sk}", auth: "user" });
  add({ file: da, method: "GET", path: "/admin/allcollections?appid={sk}", auth: "dev" });
  for (const [base, countBase] of [["/api/v/1/collection/{sk}/{colName}", "/api/v/2/collection/{sk}/{colName}"], ["/api/v/1/data/{col}", "/api/v/1/data/{col}"]] as const) {
    add({ file: da, method: "GET", path: base, auth: "user", query: "list" });
    add({ file: da, method: "POST", path: base, auth: "user", shape: "either", columns: "", bodyRequired: base.includes("/data/") || undefined, body: () => ({ s: "inserted", n: 7 }) });
    add({ file: da, method: "PUT", path: base, auth: "user", columns: "$set", bodyRequired: true, body: () => ({ query: [[{ EQ: [{ s: "no-such-row" }] }]], $set: { n: 8 } }) });
    add({ file: da, method: "DELETE", path: `${base}?query=${qs(FILTER_ALL)}`, auth: "user", noBaseline: "deletes rows" });
    add({ file: da, method: "GET", path: `${countBase}/count`, auth: "user", query: "count" });
    add({ file: da, method: "GET", path: `${countBase}/columns`, auth: "user" });
  }
  for (const base of ["/api/v/4/data/{sk}/{colName}", "/api/v/4/collection/{sk}/{colName}", "/api/v/4/data/{col}"]) {
    add({ file: da, method: "PUT", path: `${base}/upsert?conflictColumn=u`, auth: "dev", columns: "", body: () => ({ u: "upsert-key", n: 1 }) });
    add({ file: da, method: "POST", path: `${base}/index?columnName=n`, auth: "dev", noBaseline: "fails when the index exists" });
    add({ file: da, method: "DELETE", path: `${base}/index?columnName=n`, auth: "dev", noBaseline: "drops an index" });
    add({ file: da, method: "POST", path: `${base}/uniqueindex?columnName=s`, auth: "dev", noBaseline: "fails when the index exists" });
    add({ file: da, method: "DELETE", path: `${base}/uniqueindex?columnName=u`, auth: "dev", noBaseline: "drops the upsert index" });
    add({ file: da, method: "GET", path: `${base}/listindexes`, auth: "dev" });
  }
  // a collection that is a connection to an external database (PostgreSQL): the same item routes
  if (opts.pg) {
    const base = "/api/v/1/data/{connCol}";
    add({ file: da, method: "GET", path: base, auth: "user", query: "list" });
    add({ file: da, method: "POST", path: base, auth: "user", shape: "either", columns: "", bodyRequired: true, body: (_i, f) => ({ item_id: f(), s: "inserted", n: 7 }) });
    add({ file: da, method: "PUT", path: base, auth: "user", columns: "$set", bodyRequired: true, body: () => ({ query: [[{ EQ: [{ s: "no-such-row" }] }]], $set: { n: 8 } }) });
    add({ file: da, method: "DELETE", path: `${base}?query=${qs(FILTER_ALL)}`, auth: "user", noBaseline: "deletes rows" });
    add({ file: da, method: "GET", path: `${base}/count`, auth: "user", query: "count" });
    add({ file: da, method: "GET", path: `${base}/columns`, auth: "user" });
  }

  // ---- devices.ts ----------------------------------------------------------------------------
  const de = "devices.ts";
  add({ file: de, method: "POST", path: "/api/v/2/devices/{sk}/auth", auth: "public", as: "anon", body: (i) => ({ deviceName: i.deviceAuth, activeKey: i.deviceKey }) });
  for (const [base, auth] of [["/api/v/2/devices/{sk}", "user"], ["/admin/devices/{sk}", "dev"]] as const) {
    add({ file: de, method: "GET", path: base, auth, query: "list" });
    add({ file: de, method: "POST", path: base, auth, shape: "array", columns: "", body: (_i, f) => [{ name: f(), type: "sensor", state: "new", active_key: "device-key-123", enabled: true, allow_key_auth: true }] });
    add({ file: de, method: "PUT", path: base, auth, columns: "$set", body: (i) => ({ query: [[{ EQ: [{ name: i.device }] }]], $set: { state: "bulk-set" } }) });
    add({ file: de, method: "DELETE", path: `${base}?query=${qs(FILTER_ALL)}`, auth, noBaseline: "deletes devices" });
  }
  add({ file: de, method: "GET", path: "/api/v/3/devices/{sk}/count", auth: "user", query: "count" });
  add({ file: de, method: "GET", path: "/api/v/3/devices/{sk}/columns", auth: "user" });
  add({ file: de, method: "GET", path: "/admin/devices/{sk}/columns", auth: "dev" });
  add({ file: de, method: "POST", path: "/admin/devices/{sk}/columns", auth: "dev", body: (_i, f) => ({ column_name: f(), type: "string" }) });
  add({ file: de, method: "DELETE", path: "/admin/devices/{sk}/columns?column_name={dcolVictim}", auth: "dev", noBaseline: "deletes a column" });
  add({ file: de, method: "GET", path: "/api/v/4/devices/{sk}/connections", auth: "user" });
  add({ file: de, method: "GET", path: "/api/v/4/devices/{sk}/connections/{device}", auth: "user" });
  add({ file: de, method: "GET", path: "/api/v/4/devices/{sk}/connectioncount", auth: "user" });
  add({ file: de, method: "GET", path: "/admin/devices/keys/{sk}/{device}", auth: "dev" });
  add({ file: de, method: "POST", path: "/admin/devices/keys/{sk}/{device}", auth: "dev", body: () => ({ count: 2 }) });
  add({ file: de, method: "PUT", path: "/admin/devices/keys/{sk}/{device}", auth: "dev", noBaseline: "rotates keys" });
  add({ file: de, method: "DELETE", path: "/admin/devices/keys/{sk}/{device}", auth: "dev", noBaseline: "deletes keys" });
  add({ file: de, method: "GET", path: "/admin/devices/roles/{sk}/{device}", auth: "dev" });
  add({ file: de, method: "PUT", path: "/admin/devices/roles/{sk}/{device}", auth: "dev", body: () => ({ add: ["Authenticated"] }) });
  for (const [base, auth] of [["/api/v/2/devices/{sk}", "user"], ["/admin/devices/{sk}", "dev"]] as const) {
    add({ file: de, method: "GET", path: `${base}/{device}`, auth });
    add({ file: de, method: "POST", path: `${base}/{new}`, auth, columns: "", body: () => ({ type: "sensor", state: "new", active_key: "device-key-123", enabled: true, allow_key_auth: true }) });
    add({ file: de, method: "PUT", path: `${base}/{device}`, auth, columns: "", body: () => ({ state: "put-state" }) });
    add({ file: de, method: "DELETE", path: `${base}/{deviceVictim}`, auth, noBaseline: "deletes a device" });
  }

  // ---- messaging.ts --------------------------------------------------------------------------
  const me = "messaging.ts";
  add({ file: me, method: "GET", path: "/api/v/1/message/{sk}?topic={topic}&count=0", auth: "user" });
  add({ file: me, method: "DELETE", path: "/api/v/1/message/{sk}?topic={topic}&count=0", auth: "user", noBaseline: "deletes history" });
  add({ file: me, method: "POST", path: "/api/v/1/message/{sk}/publish", auth: "user", anyType: ["body"], body: (i) => ({ topic: i.topic, body: "published by the owner", qos: 0 }) });
  add({ file: me, method: "GET", path: "/api/v/1/message/{sk}/currentTopics", auth: "user" });
  add({ file: me, method: "GET", path: "/api/v/4/message/{sk}/topics", auth: "dev", query: "meta" });
  add({ file: me, method: "GET", path: "/api/v/4/message/{sk}/topics/count", auth: "dev", query: "count" });
  add({ file: me, method: "GET", path: "/api/v/4/message/{sk}/storage", auth: "dev" });
  add({ file: me, method: "PUT", path: "/api/v/4/message/{sk}/storage", auth: "dev", shape: "array", body: (i) => [{ topic: i.topic, max_rows: 100, max_time: 0, edge: true, platform: true }] });

  // ---- code.ts -------------------------------------------------------------------------------
  const co = "code.ts";
  const svcBody = (_i: Ids, f: () => string) => { const n = f(); return { code: `function ${n}(req, resp) { resp.success("ok"); }`, parameters: [], systemID: _i.sk, name: n }; };
  add({ file: co, method: "POST", path: "/api/v/1/code/{sk}/{svc}", auth: "user", open: "the service's parameters", body: () => ({ x: 1 }) });
  add({ file: co, method: "GET", path: "/api/v/1/code/{sk}/{svc}", auth: "dev" });
  add({ file: co, method: "GET", path: "/api/v/3/code/codemeta/{sk}", auth: "dev" });
  add({ file: co, method: "GET", path: "/api/v/4/{sk}/code/failed", auth: "dev", query: "meta" });
  add({ file: co, method: "POST", path: "/api/v/4/{sk}/code/failed", auth: "dev", body: (i) => ({ id: [i.failId] }) });
  add({ file: co, method: "GET", path: "/api/v/3/code/{sk}/failed", auth: "user", query: "meta" });
  add({ file: co, method: "GET", path: "/codeadmin/failed/{sk}", auth: "dev", query: "meta" });
  add({ file: co, method: "POST", path: "/codeadmin/failed/{sk}", auth: "dev", body: (i) => ({ id: [i.failId] }) });
  add({ file: co, method: "DELETE", path: "/codeadmin/failed/{sk}", auth: "dev", body: (i) => ({ id: [i.failId] }), noBaseline: "deletes failed runs" });
  add({ file: co, method: "GET", path: "/codeadmin/v/2/library/{sk}", auth: "dev" });
  add({ file: co, method: "GET", path: "/codeadmin/v/2/library/{sk}/{lib}", auth: "dev" });
  add({ file: co, method: "POST", path: "/codeadmin/v/2/library/{sk}/{new}", auth: "dev", body: () => ({ code: "function libX(x) { return x; }", dependencies: [], description: "matrix", api: "libX(x)", visibility: "system" }) });
  add({ file: co, method: "PUT", path: "/codeadmin/v/2/library/{sk}/{lib}", auth: "dev", body: () => ({ code: "function libY(x) { return x + 1; }", description: "changed" }) });
  add({ file: co, method: "DELETE", path: "/codeadmin/v/2/library/{sk}/{libVictim}", auth: "dev", noBaseline: "deletes a library" });
  add({ file: co, method: "GET", path: "/codeadmin/v/2/history/library/{sk}/{lib}", auth: "dev" });
  add({ file: co, method: "GET", path: "/codeadmin/v/2/history/library/{sk}/{lib}/1", auth: "dev" });
  for (const [list, one, auth] of [["/admin/code/v/1/{sk}", "/admin/code/v/1/{sk}", "dev"], ["/api/v/3/code/{sk}", "/api/v/3/code/{sk}/service", "user"], [null, "/codeadmin/v/2/{sk}", "dev"]] as const) {
    if (list) add({ file: co, method: "GET", path: list, auth });
    add({ file: co, method: "GET", path: `${one}/{svc}`, auth });
    add({ file: co, method: "POST", path: `${one}/{new}`, auth, body: svcBody });
    add({ file: co, method: "PUT", path: `${one}/{svc}`, auth, body: (i) => ({ code: `function ${i.svc}(req, resp) { resp.success("ok"); }`, parameters: [] }) });
    add({ file: co, method: "DELETE", path: `${one}/{svcVictim}`, auth, noBaseline: "deletes a service" });
  }

  // ---- handlers.ts ---------------------------------------------------------------------------
  const ha = "handlers.ts";
  add({ file: ha, method: "GET", path: "/admin/triggers/definitions", auth: "any" });
  for (const [triggers, trigger, timers, timer, auth] of [
    ["/admin/triggers/handlers/{sk}", "/admin/triggers/handlers/{sk}", "/admin/triggers/timers/{sk}", "/admin/triggers/timers/{sk}", "dev"],
    ["/api/v/3/code/{sk}/triggers", "/api/v/3/code/{sk}/trigger", "/api/v/3/code/{sk}/timers", "/api/v/3/code/{sk}/timer", "user"],
  ] as const) {
    add({ file: ha, method: "GET", path: triggers, auth });
    add({ file: ha, method: "GET", path: `${trigger}/{trig}`, auth });
    add({ file: ha, method: "POST", path: `${trigger}/{new}`, auth, nullable: ["key_value_pairs"], body: (i) => ({ def_module: "Data", def_name: "ItemCreated", key_value_pairs: { collectionName: i.colName }, service_name: i.svc }) });
    add({ file: ha, method: "PUT", path: `${trigger}/{trig}`, auth, nullable: ["key_value_pairs"], body: (i) => ({ key_value_pairs: { collectionName: i.colName } }) });
    add({ file: ha, method: "DELETE", path: `${trigger}/{trigVictim}`, auth, noBaseline: "deletes a trigger" });
    add({ file: ha, method: "GET", path: timers, auth });
    add({ file: ha, method: "GET", path: `${timer}/{timer}`, auth });
    add({ file: ha, method: "POST", path: `${timer}/{new}`, auth, body: (i) => ({ frequency: 3600, repeats: -1, start_time: inAnHour(), service_name: i.svc, description: "matrix timer" }) });
    add({ file: ha, method: "PUT", path: `${timer}/{timer}`, auth, body: () => ({ description: "changed", frequency: 7200 }) });
    add({ file: ha, method: "DELETE", path: `${timer}/{timerVictim}`, auth, noBaseline: "deletes a timer" });
  }

  // ---- edges.ts ------------------------------------------------------------------------------
  const ed = "edges.ts";
  add({ file: ed, method: "GET", path: "/api/v/2/edges/{sk}", auth: "user", query: "list" });
  add({ file: ed, method: "GET", path: "/admin/edges/{sk}", auth: "dev", query: "list" });
  add({ file: ed, method: "GET", path: "/api/v/3/edges/{sk}/count", auth: "user", query: "count" });
  add({ file: ed, method: "GET", path: "/api/v/3/edges/{sk}/columns", auth: "user" });
  add({ file: ed, method: "GET", path: "/admin/edges/{sk}/columns", auth: "dev" });
  add({ file: ed, method: "POST", path: "/admin/edges/{sk}/columns", auth: "dev", body: (_i, f) => ({ column_name: f(), type: "string" }) });
  add({ file: ed, method: "DELETE", path: "/admin/edges/{sk}/columns?column={ecolVictim}", auth: "dev", noBaseline: "deletes a column" });
  for (const t of ["template", "sync"]) {
    add({ file: ed, method: "GET", path: `/admin/edges/${t}/{sk}`, auth: "dev" });
    add({ file: ed, method: "PUT", path: `/admin/edges/${t}/{sk}/{edge}`, auth: "dev", body: (i) => ({ add: [{ def_module: "service", def_name: i.svc, mode: "sync" }] }) });
  }
  add({ file: ed, method: "GET", path: "/admin/{sk}/sync/edge/status/{edge}", auth: "dev" });
  add({ file: ed, method: "GET", path: "/admin/{sk}/sync/alledges/status", auth: "dev" });
  add({ file: ed, method: "POST", path: "/admin/{sk}/sync/retry", auth: "dev", body: (i) => ({ edge: i.edge }) });
  for (const [base, auth] of [["/api/v/3/edges/{sk}", "user"], ["/admin/edges/{sk}", "dev"]] as const) {
    add({ file: ed, method: "GET", path: `${base}/{edge}`, auth });
    add({ file: ed, method: "POST", path: `${base}/{new}`, auth, columns: "", body: () => ({ description: "matrix edge" }) });
    add({ file: ed, method: "PUT", path: `${base}/{edge}`, auth, columns: "", body: () => ({ description: "changed" }) });
    add({ file: ed, method: "DELETE", path: `${base}/{edgeVictim}`, auth, noBaseline: "deletes an edge" });
    add({ file: ed, method: "GET", path: `${base}/{edge}/link?limit=5`, auth: "dev" });
  }

  // ---- fleet.ts ------------------------------------------------------------------------------
  const fl = "fleet.ts";
  const offline = "the matrix's edge is not connected (503)";
  add({ file: fl, method: "POST", path: "/api/v/1/edges/{sk}/{edge}/command-exec", auth: "user", body: () => ({ command: "uptime", timeout: 5 }), noBaseline: offline });
  add({ file: fl, method: "POST", path: "/api/v/1/edges/{sk}/{edge}/restart", auth: "user", noBaseline: offline });
  // (GET .../config and GET .../edge_groups/{name} are not here: every GET of the table is read
  // by its owner, which needs a connected edge and a group; edge-ops.test.ts covers both)
  add({ file: fl, method: "GET", path: "/admin/{sk}/edge_groups", auth: "dev" });
  add({ file: fl, method: "POST", path: "/admin/{sk}/edge_groups", auth: "dev", body: (i, f) => ({ name: f(), description: "matrix group", edges: [i.edge] }) });
  const noGroup = "no edge group is made before the matrix runs (404)";
  add({ file: fl, method: "PUT", path: "/admin/{sk}/edge_groups/{new}", auth: "dev", body: () => ({ description: "changed" }), noBaseline: noGroup });
  add({ file: fl, method: "DELETE", path: "/admin/{sk}/edge_groups/{new}", auth: "dev", noBaseline: noGroup });
  add({ file: fl, method: "GET", path: "/admin/edge_report?report_days=7", auth: "devself", ownScope: true });

  // ---- webhooks.ts ---------------------------------------------------------------------------
  const wh = "webhooks.ts";
  add({ file: wh, method: "GET", path: "/admin/v/4/webhook/{sk}", auth: "dev" });
  add({ file: wh, method: "GET", path: "/admin/v/4/webhook/{sk}/{hook}", auth: "dev" });
  add({ file: wh, method: "POST", path: "/admin/v/4/webhook/{sk}/{new}", auth: "dev", body: (i) => ({ service_name: i.svc, auth_method: "platform_auth", description: "matrix hook" }) });
  add({ file: wh, method: "PUT", path: "/admin/v/4/webhook/{sk}/{hook}", auth: "dev", body: () => ({ description: "changed", auth_method: "platform_auth" }) });
  add({ file: wh, method: "DELETE", path: "/admin/v/4/webhook/{sk}/{hookVictim}", auth: "dev", noBaseline: "deletes a webhook" });
  for (const m of ["GET", "POST", "PUT", "DELETE", "PATCH"] as const) {
    const takesBody = m === "POST" || m === "PUT";
    add({ file: wh, method: m, path: "/api/v/4/webhook/execute/{sk}/{hook}", auth: "hook", as: "adminUserA", ...(takesBody ? { shape: "free" as const, body: () => ({ hello: "world" }) } : {}) });
  }

  // ---- throttlers.ts -------------------------------------------------------------------------
  const th = "throttlers.ts";
  // cases belong to the system named by their system_key (a developer's own, or the platform
  // admin's for '*' and '?'); the ones made here are for a resource no route has, and unlimited
  const kase = (i: Ids, f: () => string) => ({ case_name: f(), system_key: i.sk, consumer: "*", resource: "/nowhere", limiter_type: "frequency", max_num: -1, duration: 60, priority: 50 });
  add({ file: th, method: "GET", path: "/admin/throttlers", auth: "devself", ownScope: true });
  add({ file: th, method: "DELETE", path: "/admin/throttlers", auth: "devself", ownScope: true, noBaseline: "deletes every case" });
  add({ file: th, method: "GET", path: "/admin/throttlers/{thr}", auth: "devself", ownScope: true });
  add({ file: th, method: "DELETE", path: "/admin/throttlers/{thr}", auth: "devself", ownScope: true, noBaseline: "deletes the throttler's cases" });
  add({ file: th, method: "POST", path: "/admin/throttlers/{thr}/cases", auth: "dev", body: (i, f) => kase(i, f) });
  add({ file: th, method: "PUT", path: "/admin/throttlers/{thr}/cases/{kase}", auth: "dev", body: () => ({ priority: 60 }) });
  add({ file: th, method: "DELETE", path: "/admin/throttlers/{thr}/cases/{kaseVictim}", auth: "dev", noBaseline: "deletes a case" });

  // ---- adapters.ts ---------------------------------------------------------------------------
  const ad = "adapters.ts";
  add({ file: ad, method: "GET", path: "/admin/edges/{sk}/control?adapter={adapter}", auth: "dev" });
  for (const base of ["/api/v/4/{sk}/adapters", "/admin/{sk}/adaptors"]) {
    add({ file: ad, method: "GET", path: base, auth: "dev" });
    add({ file: ad, method: "POST", path: base, auth: "dev", body: (_i, f) => ({ name: f(), description: "matrix adapter", protocol: "modbus", architecture: "linux-amd64", os: "linux", start_command: "./start.sh" }) });
    add({ file: ad, method: "GET", path: `${base}/{adapter}`, auth: "dev" });
    add({ file: ad, method: "PUT", path: `${base}/{adapter}`, auth: "dev", body: () => ({ description: "changed" }) });
    add({ file: ad, method: "DELETE", path: `${base}/{adapterVictim}`, auth: "dev", noBaseline: "deletes an adapter" });
    add({ file: ad, method: "GET", path: `${base}/{adapter}/files`, auth: "dev" });
    add({ file: ad, method: "POST", path: `${base}/{adapter}/files`, auth: "dev", body: (_i, f) => ({ name: f(), path_name: "bin/run.sh", permissions: "0755", file: b64("echo matrix\n") }) });
    add({ file: ad, method: "GET", path: `${base}/{adapter}/files/{file}`, auth: "dev" });
    add({ file: ad, method: "PUT", path: `${base}/{adapter}/files/{file}`, auth: "dev", body: () => ({ file: b64("echo changed\n") }) });
    add({ file: ad, method: "DELETE", path: `${base}/{adapter}/files/{fileVictim}`, auth: "dev", noBaseline: "deletes a file" });
    add({ file: ad, method: "PUT", path: `${base}/{adapter}/control`, auth: "dev", body: (i) => ({ command: "status", edges: [i.edge] }), noBaseline: "needs a connected edge" });
    add({ file: ad, method: "PUT", path: `${base}/{adapter}/deploy`, auth: "dev", body: (i) => ({ edges: [i.edge] }), noBaseline: "needs a connected edge" });
  }

  // ---- externalDbs.ts ------------------------------------------------------------------------
  const ex = "externalDbs.ts";
  add({ file: ex, method: "GET", path: "/api/v/4/external-db/{sk}", auth: "dev" });
  // (the credentials of a connection nothing listens at: creating one does not connect)
  add({ file: ex, method: "POST", path: "/api/v/4/external-db/{sk}", auth: "dev", body: (_i, f) => ({ name: f(), db_type: "postgres", credentials: { user: "u", password: "p", address: "127.0.0.1", port: "1", dbname: "d" } }) });
  add({ file: ex, method: "GET", path: "/api/v/4/external-db/{sk}/{db}", auth: "user" });
  add({ file: ex, method: "PUT", path: "/api/v/4/external-db/{sk}/{db}", auth: "user", body: () => ({ credentials: { tls: false } }) });
  add({ file: ex, method: "DELETE", path: "/api/v/4/external-db/{sk}/{dbVictim}", auth: "user", noBaseline: "deletes a connection" });
  add({ file: ex, method: "POST", path: "/api/v/4/external-db/{sk}/{db}/data", auth: "user", body: () => ({ operation: ["select 1 as one"] }), ...(opts.pg ? {} : { noBaseline: "no database to run it" }) });

  // ---- serviceCaches.ts ------------------------------------------------------------------------
  const sc = "serviceCaches.ts";
  add({ file: sc, method: "GET", path: "/admin/v/4/service_caches/{sk}", auth: "dev" });
  add({ file: sc, method: "GET", path: "/admin/v/4/service_caches/{sk}/{cache}", auth: "dev" });
  add({ file: sc, method: "POST", path: "/admin/v/4/service_caches/{sk}/{new}", auth: "dev", body: () => ({ ttl: 60, description: "matrix" }), bodyRequired: true, nullable: ["description"] });
  add({ file: sc, method: "PUT", path: "/admin/v/4/service_caches/{sk}/{cache}", auth: "dev", body: () => ({ ttl: 120, description: "matrix" }), bodyRequired: true, nullable: ["description"] });
  add({ file: sc, method: "DELETE", path: "/admin/v/4/service_caches/{sk}/{cacheVictim}", auth: "dev", noBaseline: "deletes a cache" });

  // ---- sessions.ts ---------------------------------------------------------------------------
  const se = "sessions.ts";
  for (const kind of ["user", "device"]) {
    add({ file: se, method: "GET", path: `/admin/v/4/session/{sk}/${kind}`, auth: "dev" });
    add({ file: se, method: "GET", path: `/admin/v/4/session/{sk}/${kind}/count`, auth: "dev" });
    add({ file: se, method: "DELETE", path: `/admin/v/4/session/{sk}/${kind}?query=${qs(FILTER_ALL)}`, auth: "dev", noBaseline: "revokes every session of the kind" });
  }

  // ---- audit.ts ------------------------------------------------------------------------------
  const au = "audit.ts";
  add({ file: au, method: "GET", path: "/admin/audit", auth: "admin", as: "admin" });
  add({ file: au, method: "GET", path: "/admin/audit/count", auth: "admin", as: "admin" });
  add({ file: au, method: "GET", path: "/admin/audit/{sk}", auth: "dev" });
  add({ file: au, method: "GET", path: "/admin/audit/{sk}/count", auth: "dev" });

  // ---- portals.ts ----------------------------------------------------------------------------
  const po = "portals.ts";
  const kept = "a record's other fields are kept as sent (ClearBlade's portal and plugin records carry more)";
  add({ file: po, method: "GET", path: "/admin/portals/{sk}", auth: "dev" });
  add({ file: po, method: "GET", path: "/api/v/2/portals/{sk}/{portal}", auth: "user" });
  add({ file: po, method: "POST", path: "/api/v/2/portals/{sk}/{new}", auth: "dev", body: () => ({ description: "matrix", config: { pages: [] } }), extraFields: kept, anyType: ["config"] });
  add({ file: po, method: "PUT", path: "/api/v/2/portals/{sk}/{portal}", auth: "user", body: () => ({ description: "changed" }), extraFields: kept, anyType: ["config"] });
  add({ file: po, method: "DELETE", path: "/api/v/2/portals/{sk}/{portalVictim}", auth: "dev", noBaseline: "deletes a portal" });
  add({ file: po, method: "GET", path: "/api/v/2/plugins/{sk}", auth: "dev" });
  add({ file: po, method: "POST", path: "/api/v/2/plugins/{sk}", auth: "dev", body: (_i, f) => ({ name: f(), description: "matrix", config: {} }), extraFields: kept, anyType: ["config"] });
  add({ file: po, method: "GET", path: "/api/v/2/plugins/{sk}/{plugin}", auth: "dev" });
  add({ file: po, method: "PUT", path: "/api/v/2/plugins/{sk}/{plugin}", auth: "dev", body: () => ({ description: "changed" }), extraFields: kept, anyType: ["config"] });
  add({ file: po, method: "DELETE", path: "/api/v/2/plugins/{sk}/{pluginVictim}", auth: "dev", noBaseline: "deletes a plugin" });

  // ---- deployments.ts --------------------------------------------------------------------------
  const dp = "deployments.ts";
  const asset = (i: Ids) => ({ asset_class: "services", asset_id: i.svc, sync_to_edge: true, sync_to_platform: false });
  add({ file: dp, method: "GET", path: "/admin/{sk}/sync/deployment/status/{deployment}", auth: "dev" });
  add({ file: dp, method: "GET", path: "/admin/{sk}/deploy_assets", auth: "dev" });
  add({ file: dp, method: "GET", path: "/admin/{sk}/deploy_assets/services", auth: "dev" });
  add({ file: dp, method: "GET", path: "/admin/{sk}/deploy_assets/services/{svc}", auth: "dev" });
  add({ file: dp, method: "POST", path: "/api/v/3/{sk}/deployments/{new}", auth: "user", body: (i) => ({ description: "matrix", assets: [asset(i)], edges: [i.edge] }) });
  for (const [base, auth] of [["/admin/{sk}/deployments", "dev"], ["/api/v/3/{sk}/deployments", "user"]] as const) {
    add({ file: dp, method: "GET", path: base, auth, query: "list" });
    add({ file: dp, method: "POST", path: base, auth, body: (i, f) => ({ name: f(), description: "matrix", assets: [asset(i)], edges: [i.edge] }) });
    add({ file: dp, method: "GET", path: `${base}/{deployment}`, auth });
    // (a null part of the change form changes nothing, as a null description does: a Go client's nil map is null)
    add({ file: dp, method: "PUT", path: `${base}/{deployment}`, auth, nullable: ["assets", "edges"], body: (i) => ({ description: "changed", assets: { add: [asset(i)], remove: [] }, edges: { add: [i.edge], remove: [] } }) });
    add({ file: dp, method: "DELETE", path: `${base}/{deploymentVictim}`, auth, noBaseline: "deletes a deployment" });
  }

  // ---- files.ts ------------------------------------------------------------------------------
  // (a file store's files go in and out as raw bytes and its copy and move take no body: those
  // routes have no sample body, so only their callers are tried)
  const fi = "files.ts";
  const set = "/api/v/4/bucket_sets/{sk}";
  // (a nil config map comes as null from the Go SDK: none)
  const local = { platform_storage: "local", edge_storage: "local", platform_config: {}, edge_config: {} };
  add({ file: fi, method: "GET", path: set, auth: "dev" });
  add({ file: fi, method: "POST", path: set, auth: "dev", nullable: ["platform_config", "edge_config"], body: (_i, f) => ({ name: f(), ...local }) });
  add({ file: fi, method: "GET", path: `${set}/{bucketSet}`, auth: "user" });
  add({ file: fi, method: "DELETE", path: `${set}/{bucketSetVictim}`, auth: "dev", noBaseline: "deletes a bucket set" });
  add({ file: fi, method: "GET", path: `${set}/{bucketSet}/files?box=sandbox`, auth: "user" });
  add({ file: fi, method: "POST", path: `${set}/{bucketSet}/file/create`, auth: "user", body: (_i, f) => ({ box: "sandbox", path: `made/${f()}.txt`, contents: b64("made by the matrix") }) });
  add({ file: fi, method: "GET", path: `${set}/{bucketSet}/file/meta?box=sandbox&path={setFile}`, auth: "user" });
  add({ file: fi, method: "GET", path: `${set}/{bucketSet}/file/read?box=sandbox&path={setFile}`, auth: "user" });
  add({ file: fi, method: "POST", path: `${set}/{bucketSet}/file/copy`, auth: "user", body: (i, f) => ({ from_box: "sandbox", from_path: i.setFile, to_box: "inbox", to_path: `copies/${f()}.txt` }) });
  // (the edge exists but is not connected: the file waits for it, as its status says)
  add({ file: "fileSync.ts", method: "POST", path: `${set}/{bucketSet}/file/sync_to_edge`, auth: "user", body: (i) => ({ box: "sandbox", path: i.setFile, edge: i.edge }) });
  add({ file: fi, method: "POST", path: `${set}/{bucketSet}/file/move`, auth: "user", body: (i, f) => ({ from_box: "sandbox", from_path: i.setMoveFile, to_box: "outbox", to_path: `moved/${f()}.txt` }) });
  add({ file: fi, method: "POST", path: `${set}/{bucketSet}/file/delete`, auth: "user", body: (i) => ({ box: "sandbox", path: i.setFileVictim }) });
  const store = "/api/v/1/filestore/{sk}";
  add({ file: fi, method: "GET", path: store, auth: "user" });
  add({ file: fi, method: "POST", path: store, auth: "user", nullable: ["storage_config"], body: (_i, f) => ({ name: f(), storage_type: "local", storage_config: {}, read_auth_method: "clearblade_auth", write_auth_method: "clearblade_auth" }) });
  add({ file: fi, method: "GET", path: `${store}/{fileStore}`, auth: "user" });
  add({ file: fi, method: "GET", path: `${store}/{fileStore}?decrypt=true`, auth: "dev" });
  add({ file: fi, method: "DELETE", path: `${store}?name={fileStoreVictim}`, auth: "user", noBaseline: "deletes a file store" });
  add({ file: fi, method: "GET", path: `${store}/{fileStore}/file/{storeFile}`, auth: "user" });
  add({ file: fi, method: "PUT", path: `${store}/{fileStore}/file/{new}`, auth: "user" });
  add({ file: fi, method: "DELETE", path: `${store}/{fileStore}/file/{storeFileVictim}`, auth: "user", noBaseline: "deletes a file" });
  add({ file: fi, method: "GET", path: `${store}/{fileStore}/list`, auth: "user" });
  add({ file: fi, method: "GET", path: `${store}/{fileStore}/list/dir?depth=-1&limit=10`, auth: "user" });
  add({ file: fi, method: "PUT", path: `${store}/{fileStore}/copy/{storeFile}?destination={new}`, auth: "user" });
  add({ file: fi, method: "PUT", path: `${store}/{fileStore}/move/{storeFile}?destination={new}`, auth: "user" });

  // ---- settings.ts (the instance's, the platform admin's) -------------------------------------
  const st = "settings.ts";
  add({ file: st, method: "GET", path: "/admin/settings/security", auth: "admin", as: "admin" });
  add({ file: st, method: "PUT", path: "/admin/settings/security", auth: "admin", as: "admin", body: () => ({ developer_token_ttl: 86_400 }) });
  add({ file: st, method: "GET", path: "/admin/settings/email-service", auth: "admin", as: "admin" });
  add({ file: st, method: "POST", path: "/admin/settings/email-service", auth: "admin", as: "admin", body: () => ({ host: "127.0.0.1", port: "2525", from: "outpost@example.com", protocol: "SMTP", encryption_type: "NONE" }), noBaseline: "the service exists already (made before the matrix)" });
  add({ file: st, method: "PUT", path: "/admin/settings/email-service", auth: "admin", as: "admin", body: () => ({ from: "outpost@example.com" }) });
  add({ file: st, method: "DELETE", path: "/admin/settings/email-service", auth: "admin", as: "admin", noBaseline: "removes the instance's email service" });
  add({ file: st, method: "POST", path: "/admin/settings/email-service/test", auth: "admin", as: "admin", body: () => ({ recipient: "someone@example.com" }), noBaseline: "sends a mail through a server that is not there" });
  add({ file: st, method: "GET", path: "/admin/settings/sms-service", auth: "admin", as: "admin" });
  add({ file: st, method: "POST", path: "/admin/settings/sms-service", auth: "admin", as: "admin", body: () => ({ url: "http://127.0.0.1:1/sms", from: "Outpost" }), noBaseline: "the service exists already (made before the matrix)" });
  add({ file: st, method: "PUT", path: "/admin/settings/sms-service", auth: "admin", as: "admin", body: () => ({ from: "Outpost" }) });
  add({ file: st, method: "DELETE", path: "/admin/settings/sms-service", auth: "admin", as: "admin", noBaseline: "removes the instance's SMS service" });
  add({ file: st, method: "POST", path: "/admin/settings/sms-service/test", auth: "admin", as: "admin", body: () => ({ recipient: "+15550100" }), noBaseline: "sends a message through a gateway that is not there" });

  // ---- userSecrets.ts (the body is the value itself: any JSON but null) -----------------------
  const usf = "userSecrets.ts";
  add({ file: usf, method: "GET", path: "/api/v/4/user_secrets/{sk}", auth: "user" });
  add({ file: usf, method: "DELETE", path: "/api/v/4/user_secrets/{sk}", auth: "user", noBaseline: "deletes every secret of the system" });
  add({ file: usf, method: "GET", path: "/api/v/4/user_secrets/{sk}/{usecret}", auth: "user" });
  add({ file: usf, method: "POST", path: "/api/v/4/user_secrets/{sk}/{new}", auth: "user", shape: "free", bodyRequired: true, body: () => ({ key: "matrix" }) });
  add({ file: usf, method: "PUT", path: "/api/v/4/user_secrets/{sk}/{usecret}", auth: "user", shape: "free", bodyRequired: true, body: () => ({ key: "changed" }) });
  add({ file: usf, method: "DELETE", path: "/api/v/4/user_secrets/{sk}/{usecretVictim}", auth: "user", noBaseline: "deletes a secret" });

  return R;
}

/** Route templates with {name} filled from ids ({new}: a fresh name each time). */
export function fill(path: string, ids: Ids, fresh: () => string): string {
  return path.replace(/\{(\w+)\}/g, (_m, k: string) => {
    if (k === "new") return fresh();
    const v = (ids as unknown as Record<string, string>)[k];
    if (v === undefined) throw new Error(`no id for {${k}} in ${path}`);
    return encodeURIComponent(v);
  });
}
