// What the audit trail hears from the HTTP API: every create, update and delete a caller made
// through it, told once the answer is known.
//
// Recorded here rather than in the domain modules: only the HTTP layer knows all four things a row
// holds at once (the caller, the asset as the route names it, what was sent, how long the answer
// took), one table of routes covers every asset class, and no domain module changes. What is not
// recorded: writes a code service makes through its library (they are the service's, not a
// caller's), and rows an edge syncs up. A route missing from RULES is recorded under the first
// word of its path (a new asset's routes are audited before anyone lists them).
import type { Tokens } from "../auth/tokens.ts";
import { type ActionType, type AuditEntry, type AuditTrail, emailOf, userTypeOf } from "../domain/audit.ts";
import { type AnswerListener, pathElement, type RequestMetrics, type Route, UNMATCHED } from "./metrics.ts";
import { bodyTexts, pathOf, queryOf, systemKeyOf, tokenOf } from "./request.ts";

/** Bodies up to this size are kept as the row's changes; a larger one is noted by its size. */
export const CHANGES_MAX_BYTES = 16 * 1024;
const REDACTED = "(redacted)";
/** Fields whose values never reach the trail. */
const SECRET_FIELD = /pass(word)?|secret|token|^key$|active_?key|private|otp|code_?verifier/i;

/** How a route's writes are recorded: the asset class, the path parameter naming the asset, and an
 *  action other than the method's. */
interface Rule {
  cls: string; id?: "name" | "key" | "file" | "caseName"; action?: ActionType; systemKeyParam?: "key";
  /** a columns route: Create Columns or Delete Columns */
  columns?: true;
  /** the body may add or drop a column (addColumn, deleteColumn) rather than change the asset */
  columnsInBody?: true;
  /** the asset is a collection named by id only (its system found when the row is written) */
  collectionId?: true;
  /** the system is made by the request: its key is in the answer */
  keyInAnswer?: true;
  /** collection management: the system in the body (appID) or the collection by id (body or query) */
  managed?: true;
  /** the whole body is a secret's value (user secrets): never read, recorded as redacted */
  secretBody?: true;
}

const ACTIONS: Record<string, ActionType> = { POST: "Create", PUT: "Update", PATCH: "Update", DELETE: "Delete" };

/** Route -> rule; null: the route changes no asset (sign-ins, publishes, runs, queries). */
export const RULES: Record<string, Rule | null> = {
  "/admin/auth": null, "/admin/auth/verify": null, "/admin/settings/email-service/test": null, "/admin/settings/sms-service/test": null, "/admin/logout": null, "/admin/checkauth": null, "/api/v/1/user/auth": null, "/api/v/1/user/anon": null,
  "/api/v/1/user/checkauth": null, "/api/v/1/user/logout": null, "/api/v/2/devices/:systemKey/auth": null,
  "/api/v/1/message/:systemKey/publish": null, "/api/v/1/code/:systemKey/:name": null,
  "/api/v/4/webhook/execute/:systemKey/:name": null, "/api/v/4/webhook/execute/:systemKey/:name/*": null,
  "/api/v/1/edges/:systemKey/:name/command-exec": null, "/api/v/1/edges/:systemKey/:name/restart": null,
  "/api/v/4/:systemKey/code/failed": null, "/codeadmin/failed/:systemKey": null, "/codeadmin/v/3/running/:systemKey": null,
  "/api/v/4/external-db/:systemKey/:name/data": null,
  "/admin/systemmanagement": { cls: "system", keyInAnswer: true }, "/admin/v/4/systemmanagement": { cls: "system", keyInAnswer: true }, "/admin/regensystemsecret": { cls: "system" },
  "/admin/reg": { cls: "developers" }, "/admin/userinfo": { cls: "developers" }, "/admin/devkeys": { cls: "developers" },
  "/admin/devkeys/:key": { cls: "developers", id: "key" },
  "/admin/putpass": { cls: "developers", action: "Developer Password Reset" }, "/admin/resetpassword": { cls: "developers", action: "Developer Password Reset" },
  "/admin/user/:systemKey": { cls: "users" }, "/admin/user/:systemKey/columns": { cls: "users", columns: true },
  "/admin/user/:systemKey/roles": { cls: "rolesperms" }, "/api/v/3/user/roles/:systemKey": { cls: "rolesperms" },
  "/api/v/1/user/reg": { cls: "users" }, "/api/v/1/user/info": { cls: "users" }, "/api/v/2/user/info": { cls: "users" },
  "/api/v/4/user/manage": { cls: "users" }, "/api/v/1/user/pass": { cls: "users", action: "User Password Reset" },
  "/api/v/3/collectionmanagement": { cls: "collections", columnsInBody: true, managed: true },
  "/admin/collectionmanagement": { cls: "collections", columnsInBody: true, managed: true },
  "/api/v/1/data/:key": { cls: "collections", id: "key", collectionId: true },
  "/api/v/4/data/:key/upsert": { cls: "collections", id: "key", collectionId: true },
  "/api/v/4/data/:key/index": { cls: "collections", id: "key", collectionId: true },
  "/api/v/4/data/:key/uniqueindex": { cls: "collections", id: "key", collectionId: true },
  "/api/v/1/collection/:key/:name": { cls: "collections", id: "name", systemKeyParam: "key" },
  "/api/v/4/data/:key/:name/upsert": { cls: "collections", id: "name", systemKeyParam: "key" },
  "/api/v/4/data/:key/:name/index": { cls: "collections", id: "name", systemKeyParam: "key" },
  "/api/v/4/data/:key/:name/uniqueindex": { cls: "collections", id: "name", systemKeyParam: "key" },
  "/api/v/4/collection/:key/:name/upsert": { cls: "collections", id: "name", systemKeyParam: "key" },
  "/api/v/4/collection/:key/:name/index": { cls: "collections", id: "name", systemKeyParam: "key" },
  "/api/v/4/collection/:key/:name/uniqueindex": { cls: "collections", id: "name", systemKeyParam: "key" },
  "/api/v/2/devices/:systemKey": { cls: "devices" }, "/admin/devices/:systemKey": { cls: "devices" },
  "/api/v/2/devices/:systemKey/:name": { cls: "devices", id: "name" }, "/admin/devices/:systemKey/:name": { cls: "devices", id: "name" },
  "/admin/devices/:systemKey/columns": { cls: "devices", columns: true },
  "/admin/devices/keys/:systemKey/:name": { cls: "devices", id: "name" }, "/admin/devices/roles/:systemKey/:name": { cls: "devices", id: "name", action: "Update" },
  "/api/v/1/message/:systemKey": { cls: "messaging" }, "/api/v/4/message/:systemKey/storage": { cls: "messaging" },
  "/admin/code/v/1/:systemKey/:name": { cls: "services", id: "name" }, "/api/v/3/code/:systemKey/service/:name": { cls: "services", id: "name" },
  "/codeadmin/v/2/:systemKey/:name": { cls: "services", id: "name" },
  "/codeadmin/v/2/logs/:systemKey/:name": { cls: "services", id: "name", action: "Update" }, "/api/v/3/code/:systemKey/logs/:name": { cls: "services", id: "name", action: "Update" },
  "/codeadmin/v/2/library/:systemKey/:name": { cls: "libraries", id: "name" },
  "/admin/triggers/handlers/:systemKey/:name": { cls: "triggers", id: "name" }, "/api/v/3/code/:systemKey/trigger/:name": { cls: "triggers", id: "name" },
  "/admin/triggers/timers/:systemKey/:name": { cls: "timers", id: "name" }, "/api/v/3/code/:systemKey/timer/:name": { cls: "timers", id: "name" },
  "/admin/edges/:systemKey/:name": { cls: "edges", id: "name" }, "/api/v/3/edges/:systemKey/:name": { cls: "edges", id: "name" },
  "/admin/edges/:systemKey/columns": { cls: "edges", columns: true },
  "/admin/edges/template/:systemKey/:name": { cls: "edges", id: "name", action: "Update" }, "/admin/edges/sync/:systemKey/:name": { cls: "edges", id: "name", action: "Update" },
  "/admin/:systemKey/sync/retry": { cls: "edges", action: "Update" },
  "/admin/:systemKey/edge_groups": { cls: "edgegroups" }, "/admin/:systemKey/edge_groups/:name": { cls: "edgegroups", id: "name" },
  "/admin/v/4/webhook/:systemKey/:name": { cls: "webhooks", id: "name" },
  "/admin/v/4/service_caches/:systemKey/:name": { cls: "servicecaches", id: "name" },
  "/admin/v/4/service_caches/:systemKey/:name/values": { cls: "servicecaches", id: "name", action: "Update" },
  "/admin/:systemKey/adaptors": { cls: "adaptors" }, "/admin/:systemKey/adaptors/:name": { cls: "adaptors", id: "name" },
  "/admin/:systemKey/adaptors/:name/control": { cls: "adaptors", id: "name", action: "Update" },
  "/admin/:systemKey/adaptors/:name/deploy": { cls: "adaptors", id: "name", action: "Update" },
  "/admin/:systemKey/adaptors/:name/files": { cls: "adaptorFiles", id: "name" }, "/admin/:systemKey/adaptors/:name/files/:file": { cls: "adaptorFiles", id: "file" },
  "/api/v/4/:systemKey/adapters": { cls: "adaptors" }, "/api/v/4/:systemKey/adapters/:name": { cls: "adaptors", id: "name" },
  "/api/v/4/:systemKey/adapters/:name/control": { cls: "adaptors", id: "name", action: "Update" },
  "/api/v/4/:systemKey/adapters/:name/deploy": { cls: "adaptors", id: "name", action: "Update" },
  "/api/v/4/:systemKey/adapters/:name/files": { cls: "adaptorFiles", id: "name" }, "/api/v/4/:systemKey/adapters/:name/files/:file": { cls: "adaptorFiles", id: "file" },
  "/api/v/4/external-db/:systemKey": { cls: "externaldbs" }, "/api/v/4/external-db/:systemKey/:name": { cls: "externaldbs", id: "name" },
  "/admin/throttlers": { cls: "throttlers" }, "/admin/throttlers/:name": { cls: "throttlers", id: "name" },
  "/admin/throttlers/:name/cases": { cls: "throttlers", id: "name" }, "/admin/throttlers/:name/cases/:caseName": { cls: "throttlers", id: "caseName" },
  "/admin/v/4/session/:systemKey/user": { cls: "usersessions" }, "/admin/v/4/session/:systemKey/device": { cls: "devicesessions" },
  "/api/v/4/user_secrets/:systemKey": { cls: "usersecrets", secretBody: true }, "/api/v/4/user_secrets/:systemKey/:name": { cls: "usersecrets", id: "name", secretBody: true },
};

const NOT_A_CLASS = new Set(["admin", "api", "v", "codeadmin", "console-api"]);

/** The rule of a route RULES does not list: its class is the first word of its path that is
 *  neither a prefix, a version nor a parameter ("/admin/:systemKey/deployments": deployments). */
export function ruleOf(label: string): Rule | null {
  if (Object.hasOwn(RULES, label)) return RULES[label]!;
  const word = label.split("/").find((w) => w && !w.startsWith(":") && !NOT_A_CLASS.has(w) && !/^\d+$/.test(w) && w !== "*");
  return word ? { cls: word, ...(label.endsWith("/:name") ? { id: "name" as const } : {}) } : null;
}

/** A body's fields with secrets' values replaced. */
export function redacted(v: unknown, depth = 0): unknown {
  if (depth > 8 || v === null || typeof v !== "object") return v;
  if (Array.isArray(v)) return v.map((x) => redacted(x, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) out[k] = SECRET_FIELD.test(k) && x !== null && typeof x !== "object" ? REDACTED : redacted(x, depth + 1);
  return out;
}

/** A body that may hold a secret field (then parsed, to take its value out). */
const SECRET_TEXT = /pass|secret|token|"key"|active_?key|private|otp|verifier/i;

/** A body without secrets as the row's changes, unparsed: an object as it is, anything else under
 *  `body` (the `query` of a write by query added). */
function sentAsChanges(text: string, query: string | null): string {
  const t = text.trim();
  const q = query === null ? "" : `,"query":${JSON.stringify(query)}`;
  if (t.startsWith("{") && t.endsWith("}")) return q ? `${t.slice(0, -1)}${t.length > 2 ? q : q.slice(1)}}` : t;
  return `{"body":${t}${q}}`;
}

/** A body as JSON (undefined: none, or not JSON). */
function parsed(text: string | null): unknown {
  if (!text?.trim()) return undefined;
  try { return JSON.parse(text); } catch { return undefined; }
}

const fields = (v: unknown): Record<string, unknown> => (v !== null && typeof v === "object" && !Array.isArray(v) ? v as Record<string, unknown> : {});

/** The row's changes: what was sent (and the `query` a write by query named). */
function changesOf(body: unknown, text: string | null, size: number, query: string | null): string {
  const sent = body === undefined ? (size > 0 || text ? { body_bytes: size || (text ?? "").length } : {}) : redacted(body);
  const out = sent !== null && typeof sent === "object" && !Array.isArray(sent) ? { ...sent } : { body: sent };
  return JSON.stringify(query === null ? out : { ...out, query });
}

/** The asset's name in a body, when the path has none (a user's email, a system's name). */
function idIn(body: unknown): string {
  const b = fields(body);
  for (const f of ["item_id", "user_id", "email", "name", "id", "collection_id", "collectionID", "system_key", "systemKey"]) if (typeof b[f] === "string") return b[f] as string;
  return "";
}

/** The system key an answer names (a system just made). */
async function keyInAnswer(answer: unknown): Promise<string> {
  try {
    const a = fields(answer instanceof Response ? await answer.json() : answer);
    for (const f of ["appID", "system_key", "systemKey"]) if (typeof a[f] === "string") return a[f] as string;
  } catch { /* not JSON */ }
  return "";
}

export class HttpAudit {
  constructor(private readonly trail: AuditTrail, private readonly tokens: Tokens, private readonly requests: RequestMetrics) {}

  /** Before the handler runs: a collection deleted by id has its system looked up while it exists. */
  before(request: Request) {
    if (request.method !== "DELETE" || !request.url.includes("collectionmanagement")) return;
    if (ruleOf(this.requests.routeOf("DELETE", pathOf(request.url)).label)?.managed) this.trail.learnCollection(queryOf(request).get("id"));
  }

  /** The answer listener with this one after it. */
  after(first: AnswerListener): AnswerListener {
    return (request, route, path, status, ms, answer) => {
      first(request, route, path, status, ms, answer);
      this.answered(request, route, path, status, ms, answer);
    };
  }

  /** per route: its rule and where its parameters are in a path (found once) */
  private readonly routes = new Map<string, { rule: Rule; at: Record<string, number> } | null>();

  private routeRule(label: string) {
    let r = this.routes.get(label);
    if (r === undefined) {
      const rule = ruleOf(label);
      const at: Record<string, number> = {};
      label.split("/").forEach((w, i) => { if (w.startsWith(":")) at[w.slice(1)] = i - 1; });
      this.routes.set(label, (r = rule && { rule, at }));
    }
    return r;
  }

  private answered(request: Request, route: Route, path: string, status: number, ms: number, answer: unknown) {
    if (status >= 400 || !ACTIONS[request.method] || route.label === UNMATCHED) return;
    const known = this.routeRule(route.label);
    if (!known) return;
    const { rule, at: paramAt } = known;
    const param = (name: string | undefined) => (name !== undefined && paramAt[name] !== undefined ? pathElement(path, paramAt[name]!) : undefined);
    const token = tokenOf(request);
    const p = token ? this.tokens.resolveNow(token) ?? null : null;
    const own = p && p.kind !== "developer" ? p.systemKey : null;
    // a collection named by id only: its system is the token's, or found when the row is written
    const systemKey = rule.collectionId ? own ?? ""
      : param(rule.systemKeyParam) ?? (route.systemKeyAt >= 0 ? pathElement(path, route.systemKeyAt) : undefined) ?? own ?? systemKeyOf(request) ?? "";
    const sent = rule.secretBody ? null : bodyTexts.get(request) ?? null;
    const text = sent !== null && sent.length <= CHANGES_MAX_BYTES ? sent : null;
    const size = sent?.length ?? Number(request.headers.get("content-length") ?? 0);
    const query = request.url.includes("?") ? queryOf(request).get("query") : null;
    // parsed only when a field of it is needed, or a secret may be in it to take out
    const needed = !!text && (rule.managed || rule.columnsInBody || rule.keyInAnswer || !rule.id || SECRET_TEXT.test(text) || !/^\s*[[{]/.test(text));
    const body = needed ? parsed(text) : undefined;
    const b = fields(body);
    let action = rule.action ?? ACTIONS[request.method]!;
    if (rule.columns) action = request.method === "DELETE" ? "Delete Columns" : "Create Columns";
    else if (rule.columnsInBody && (b.addColumn || b.deleteColumn)) action = b.addColumn ? "Create Columns" : "Delete Columns";
    const inBody = rule.managed ? [b.appID, b.systemKey, b.system_key].find((v) => typeof v === "string") as string | undefined : undefined;
    const managedId = rule.managed && !inBody ? (request.method === "DELETE" ? queryOf(request).get("id") : typeof b.id === "string" ? b.id : null) : null;
    const assetId = param(rule.id) ?? (managedId || idIn(body));
    const entry: AuditEntry = {
      systemKey: systemKey || inBody || "",
      assetClass: rule.cls,
      action,
      // a sign-up has no token yet: its email is the body's
      email: emailOf(p) || (typeof b.email === "string" && (rule.cls === "developers" || rule.cls === "users") ? b.email : ""),
      userType: userTypeOf(p),
      assetId,
      changes: rule.secretBody ? JSON.stringify({ value: REDACTED, ...(query === null ? {} : { query }) })
        : needed || !text ? changesOf(body, text, size, query) : sentAsChanges(text, query),
      responseMs: ms, at: Date.now(),
    };
    // (the collection a data route names by id is its asset: found once)
    if (rule.collectionId) entry.collectionId = rule.id === "key" ? assetId : param("key");
    else if (managedId) entry.collectionId = managedId;
    if (!rule.keyInAnswer || entry.systemKey) return this.trail.record(entry);
    // a system just made: its key is in the answer (copied now: the answer is sent, and gone, next)
    void keyInAnswer(answer instanceof Response ? answer.clone() : answer).then((key) => {
      this.trail.record({ ...entry, systemKey: key, assetId: entry.assetId || key });
    });
  }
}
