// The web console: a client of the public API like any other. A developer signs in through
// /admin/auth; the token lives in sessionStorage (gone with the tab, never in a URL) and goes in
// the ClearBlade-DevToken header. Everything shown is built as DOM nodes and text, never as HTML
// markup, so nothing a record holds can run in the page.
// It imports nothing of the server's but the table of sync kinds (plain data, bundled in).
import { TEMPLATE_MODULES } from "../../core/syncKinds.ts";

type Child = Node | string | number | null | undefined | false | Child[];
type Attrs = Record<string, string | number | boolean | null | undefined | ((e: Event) => void)>;

function append(el: Node, children: Child[]) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
}

function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (typeof v === "function") el.addEventListener(k.replace(/^on/, ""), v);
    else if (k === "class") el.className = String(v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

const $ = (id: string) => document.getElementById(id)!;
function show(el: HTMLElement, ...children: Child[]) { el.replaceChildren(); append(el, children); }

// ---- the API ----------------------------------------------------------------------------------

const TOKEN_KEY = "outpost.devToken", EMAIL_KEY = "outpost.email";
let token = sessionStorage.getItem(TOKEN_KEY);

class CallError extends Error {}

async function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  if (token) headers["ClearBlade-DevToken"] = token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store" });
  const text = await r.text();
  let json: any;
  try { json = JSON.parse(text); } catch { json = undefined; }
  if (!r.ok) {
    // an expired or revoked session: sign in again
    if (token && (r.status === 401 || json?.error?.code === 204)) { forget(); void route(); }
    throw new CallError(json?.error?.detail ?? `${r.status} ${r.statusText}`);
  }
  return json as T;
}

function forget() {
  token = null;
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(EMAIL_KEY);
}

let about: Promise<{ buildId: string; version: string }> | undefined;
const mode = async () => (await (about ??= api("GET", "/api/about"))).buildId === "edge" ? "edge" : "platform";

// ---- formatting -------------------------------------------------------------------------------

function ago(epochS: number | null | undefined): string {
  if (!epochS) return "never";
  const s = Math.max(0, Math.round(Date.now() / 1000 - epochS));
  if (s < 120) return `${s}s ago`;
  if (s < 7200) return `${Math.round(s / 60)}m ago`;
  if (s < 172_800) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86_400)}d ago`;
}
const when = (epochS: number | null | undefined) => (epochS ? new Date(epochS * 1000).toLocaleString() : "");
const pill = (text: string, kind: "ok" | "bad" | "warn") => h("span", { class: `pill ${kind}` }, text);
const statusPill = (s: string) => pill(s, s === "synced" ? "ok" : s === "failed" ? "bad" : "warn");
const linkPill = (connected: boolean) => pill(connected ? "connected" : "disconnected", connected ? "ok" : "bad");
const enc = encodeURIComponent;
const errorBox = (e: unknown) => h("p", { class: "error", role: "alert" }, e instanceof Error ? e.message : String(e));

type Head = (string | [string, string])[];
const emptyRow = (cols: number) => h("tr", {}, h("td", { colspan: cols, class: "muted" }, "nothing to show"));

function table(head: Head, rows: Node[], attrs: Attrs = {}) {
  return h("table", attrs,
    h("thead", {}, h("tr", {}, head.map((c) => (Array.isArray(c) ? h("th", { class: c[1] }, c[0]) : h("th", {}, c))))),
    h("tbody", {}, rows.length ? rows : emptyRow(head.length)));
}

interface LiveRow { key: string; /** the row's content: a row whose content is the same stays */ sig: string; make(): HTMLTableRowElement; touch?(tr: HTMLTableRowElement): void }

/** A table refreshed in place: rows are kept by key, and a row whose content did not change stays
 *  the same element (a click on its link or button is not lost to a refresh); `touch` updates its
 *  changing text (how long ago). */
function liveTable(head: Head, attrs: Attrs = {}) {
  const tbody = h("tbody");
  const el = h("table", attrs, h("thead", {}, h("tr", {}, head.map((c) => (Array.isArray(c) ? h("th", { class: c[1] }, c[0]) : h("th", {}, c))))), tbody);
  const kept = new Map<string, HTMLTableRowElement>();
  const update = (rows: LiveRow[]) => {
    const next: HTMLTableRowElement[] = rows.map((r) => {
      let tr = kept.get(r.key);
      if (!tr || tr.dataset.sig !== r.sig) {
        tr = r.make();
        tr.dataset.sig = r.sig;
        kept.set(r.key, tr);
      } else r.touch?.(tr);
      return tr;
    });
    const keys = new Set(rows.map((r) => r.key));
    for (const k of [...kept.keys()]) if (!keys.has(k)) kept.delete(k);
    if (!next.length) next.push(emptyRow(head.length));
    next.forEach((tr, i) => { if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] ?? null); });
    while (tbody.children.length > next.length) tbody.lastElementChild!.remove();
  };
  return { el, update };
}

// ---- routing ----------------------------------------------------------------------------------

/** Timers of the page shown; a new page stops them. `page` tells a late answer it is stale. */
let timers: ReturnType<typeof setInterval>[] = [];
let page = 0;

function every(ms: number, fn: () => Promise<void>) {
  const mine = page;
  let busy = false;
  const tick = async () => {
    if (busy || mine !== page) return;
    busy = true;
    try { await fn(); } finally { busy = false; }
  };
  void tick();
  timers.push(setInterval(tick, ms));
}

async function route() {
  page++;
  for (const t of timers) clearInterval(t);
  timers = [];
  const main = $("main");
  if (!token) { bar([]); return signIn(main); }
  bar([]);
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if ((await mode()) === "edge") return edgeSelf(main);
    if (parts[0] === "s" && parts[1]) {
      const sk = parts[1];
      if (parts[2] === "edge" && parts[3]) return edgePage(main, sk, parts[3]);
      if (parts[2] === "throttling") return throttling(main, sk);
      if (parts[2] === "messages") return messages(main, sk, parts[3]);
      return edges(main, sk);
    }
    return systems(main);
  } catch (e) {
    show(main, errorBox(e));
  }
}

function bar(trail: [string, string][]) {
  show($("where"), trail.map(([text, href], i) => [i ? " / " : "", h("a", { href }, text)]));
  const email = sessionStorage.getItem(EMAIL_KEY);
  show($("who"), token ? [h("span", {}, email ?? ""), h("button", { id: "signout", onclick: signOut }, "Sign out")] : []);
}

async function signOut() {
  try { await api("POST", "/admin/logout"); } catch { /* the session is dropped here either way */ }
  forget();
  location.hash = "#/";
  void route();
}

// ---- sign-in ----------------------------------------------------------------------------------

function signIn(main: HTMLElement) {
  const email = h("input", { type: "email", name: "email", id: "email", autocomplete: "username", required: true });
  const password = h("input", { type: "password", name: "password", id: "password", autocomplete: "current-password", required: true });
  const msg = h("div");
  const form = h("form", { class: "signin card", id: "signin" },
    h("h1", {}, "Sign in"),
    h("label", {}, "Email", email),
    h("label", {}, "Password", password),
    msg,
    h("button", { type: "submit", class: "primary" }, "Sign in"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const r = await api<{ dev_token: string }>("POST", "/admin/auth", { email: email.value, password: password.value });
      token = r.dev_token;
      sessionStorage.setItem(TOKEN_KEY, token);
      sessionStorage.setItem(EMAIL_KEY, email.value);
      await route();
    } catch (err) {
      show(msg, errorBox(err));
    }
  });
  show(main, form);
  email.focus();
}

// ---- platform: systems ------------------------------------------------------------------------

async function systems(main: HTMLElement) {
  bar([["Systems", "#/"]]);
  const list = await api<{ systemKey: string; name: string; description: string }[]>("GET", "/admin/allsystems");
  show(main, h("h1", {}, "Systems"),
    table(["Name", "System key", "Description"], list.map((s) =>
      h("tr", { "data-system": s.systemKey }, h("td", {}, h("a", { href: `#/s/${enc(s.systemKey)}` }, s.name)), h("td", {}, h("code", {}, s.systemKey)), h("td", {}, s.description)))));
}

function tabs(sk: string, on: string) {
  const t = (name: string, href: string) => h("a", { href, class: on === name ? "on" : undefined }, name);
  return h("nav", { class: "tabs" }, t("Edges", `#/s/${enc(sk)}`), t("Throttling", `#/s/${enc(sk)}/throttling`), t("Messages", `#/s/${enc(sk)}/messages`));
}

async function systemName(sk: string) {
  try { return (await api<{ name: string }>("GET", `/admin/systemmanagement?id=${enc(sk)}`)).name; } catch { return sk; }
}

// ---- platform: a system's edges ---------------------------------------------------------------

interface Asset { asset_type: string; asset_name: string; status: string; desired_version: number; applied_version: number; attempts: number; last_error: string; updated_at: string; source?: string; entry?: string }
interface EdgeRecord { name: string; isConnected: boolean; last_talked: number | null; sync_lag: number | null; template?: string; last_refusal?: string; last_refusal_at?: number | null }
/** Where a template entry (or the asset it brings) comes from, as the API names it. */
const oneSource = (s: string) => (s === "edge" ? "this edge" : s.startsWith("template:") ? `template ${s.slice(9)}` : s.startsWith("deployment:") ? `deployment ${s.slice(11)}` : s);
/** Where an entry comes from (several, comma-separated, when a deployment brings it too). */
const sourceText = (source: string | undefined) => (!source ? "–" : source.split(",").map(oneSource).join(", "));
const count = (assets: Asset[], status: string) => assets.filter((a) => a.status === status).length;

let failedOnly = false;

async function edges(main: HTMLElement, sk: string) {
  const name = await systemName(sk);
  bar([["Systems", "#/"], [name, `#/s/${enc(sk)}`]]);
  const filter = h("input", { type: "checkbox", id: "failed-only", checked: failedOnly });
  const summary = h("span", { class: "muted", id: "edges-summary" });
  const holder = h("div", { id: "edges" });
  const msg = h("div");
  show(main, h("h1", {}, name), tabs(sk, "Edges"),
    h("div", { class: "row" }, h("label", {}, filter, " failed only"), summary), msg, holder);
  let last: { rec: EdgeRecord; assets: Asset[] }[] = [];
  const tbl = liveTable(["Edge", "Link", "Last talked", ["Sync lag", "num"], ["Pending", "num"], ["Synced", "num"], ["Failed", "num"]], { id: "edges-table" });
  show(holder, tbl.el);
  const render = () => {
    const shown = failedOnly ? last.filter((e) => count(e.assets, "failed") > 0) : last;
    tbl.update(shown.map(({ rec, assets }) => {
      const n = { pending: count(assets, "pending"), synced: count(assets, "synced"), failed: count(assets, "failed") };
      return {
        key: rec.name, sig: JSON.stringify([rec.isConnected, rec.last_talked, rec.sync_lag, n]),
        touch: (tr) => { tr.querySelector("td.ago")!.textContent = ago(rec.last_talked); },
        make: () => h("tr", { "data-edge": rec.name, "data-connected": String(rec.isConnected) },
          h("td", {}, h("a", { href: `#/s/${enc(sk)}/edge/${enc(rec.name)}` }, rec.name)),
          h("td", { class: "link" }, linkPill(rec.isConnected)),
          h("td", { class: "ago", title: when(rec.last_talked) }, ago(rec.last_talked)),
          h("td", { class: "num" }, rec.sync_lag ?? "–"),
          h("td", { class: "num" }, n.pending),
          h("td", { class: "num" }, n.synced),
          h("td", { class: "num failed" }, n.failed ? pill(String(n.failed), "bad") : "0")),
      };
    }));
    const connected = last.filter((e) => e.rec.isConnected).length, failing = last.filter((e) => count(e.assets, "failed") > 0).length;
    summary.textContent = `${last.length} edges, ${connected} connected, ${failing} with failed assets · updated ${new Date().toLocaleTimeString()}`;
  };
  filter.addEventListener("change", () => { failedOnly = filter.checked; render(); });
  every(2000, async () => {
    try {
      const [records, all] = await Promise.all([
        api<EdgeRecord[]>("GET", `/admin/edges/${enc(sk)}`),
        api<{ edge_name: string; assets: Asset[] }[]>("GET", `/admin/${enc(sk)}/sync/alledges/status`),
      ]);
      const assetsOf = new Map(all.map((e) => [e.edge_name, e.assets]));
      last = records.map((rec) => ({ rec, assets: assetsOf.get(rec.name) ?? [] })).sort((a, b) => a.rec.name.localeCompare(b.rec.name));
      show(msg);
      render();
    } catch (e) { show(msg, errorBox(e)); }
  });
}

// ---- platform: one edge -----------------------------------------------------------------------

/** The kinds of assets a template names and how they go (as the API takes them). */
const MODULES: string[] = [...TEMPLATE_MODULES];
const MODES = ["deploy", "sync_to_edge", "sync_to_platform", "sync"];
interface Entry { def_module: string; def_name: string; mode: string; rows?: boolean; source?: string }

async function edgePage(main: HTMLElement, sk: string, edge: string) {
  const name = await systemName(sk);
  bar([["Systems", "#/"], [name, `#/s/${enc(sk)}`], [edge, `#/s/${enc(sk)}/edge/${enc(edge)}`]]);
  const head = h("div", { class: "card", id: "edge-head" });
  const msg = h("div");
  const filter = h("input", { type: "checkbox", id: "assets-failed-only", checked: failedOnly });
  const retryAll = h("button", { id: "retry-all" }, "Retry all failed");
  const assetsBox = h("div", { id: "assets" });
  const tplBox = h("div", { id: "template" });
  show(main, h("h1", {}, `Edge ${edge}`), head, msg,
    h("h2", {}, "Assets"), h("div", { class: "row" }, h("label", {}, filter, " failed only"), retryAll), assetsBox,
    h("h2", {}, "Template"), tplBox);

  let assets: Asset[] = [];
  const retry = async (body: Record<string, string>, button: HTMLButtonElement) => {
    button.disabled = true;
    try { await api("POST", `/admin/${enc(sk)}/sync/retry`, { edge, ...body }); await refresh(); show(msg); }
    catch (e) { show(msg, errorBox(e)); }
    finally { button.disabled = false; }
  };
  const tbl = liveTable(["Type", "Name", "Status", ["Desired", "num"], ["Applied", "num"], ["Attempts", "num"], "Source", "Last error", ""], { id: "assets-table" });
  show(assetsBox, tbl.el);
  const renderAssets = () => {
    const shown = failedOnly ? assets.filter((a) => a.status === "failed") : assets;
    tbl.update(shown.map((a) => ({
      key: `${a.asset_type}/${a.asset_name}`, sig: JSON.stringify([a.status, a.desired_version, a.applied_version, a.attempts, a.last_error, a.source, a.entry]),
      make: () => {
        const b = h("button", { class: "retry" }, "Retry");
        b.addEventListener("click", () => void retry({ asset_class: a.asset_type, asset_id: a.asset_name }, b));
        return h("tr", { "data-asset": `${a.asset_type}/${a.asset_name}`, "data-status": a.status },
          h("td", {}, a.asset_type), h("td", {}, a.asset_name), h("td", { class: "status" }, statusPill(a.status)),
          h("td", { class: "num" }, a.desired_version), h("td", { class: "num" }, a.applied_version), h("td", { class: "num" }, a.attempts),
          h("td", { class: "source", title: a.entry ?? "" }, sourceText(a.source), a.entry ? h("span", { class: "muted" }, ` (${a.entry})`) : null),
          h("td", { class: a.last_error ? "err" : "muted" }, a.last_error || "–"), h("td", {}, a.status === "failed" ? b : null));
      },
    })));
    retryAll.disabled = !assets.some((a) => a.status === "failed");
  };
  filter.addEventListener("change", () => { failedOnly = filter.checked; renderAssets(); });
  retryAll.addEventListener("click", () => void retry({}, retryAll));
  const refresh = async () => {
    const [rec, list] = await Promise.all([
      api<EdgeRecord>("GET", `/admin/edges/${enc(sk)}/${enc(edge)}`),
      api<Asset[]>("GET", `/admin/${enc(sk)}/sync/edge/status/${enc(edge)}`),
    ]);
    show(head, h("dl", { class: "kv" },
      h("dt", {}, "Link"), h("dd", { id: "edge-link" }, linkPill(rec.isConnected)),
      h("dt", {}, "Last talked"), h("dd", { title: when(rec.last_talked) }, ago(rec.last_talked)),
      h("dt", {}, "Sync lag"), h("dd", {}, rec.sync_lag ?? "–"),
      h("dt", {}, "Named template"), h("dd", { id: "edge-template" }, rec.template || "none (its own entries only)"),
      rec.last_refusal ? [h("dt", {}, "Last refused"), h("dd", { id: "edge-refusal", class: "err", title: when(rec.last_refusal_at) }, `${ago(rec.last_refusal_at)}: ${rec.last_refusal}`)] : null,
      h("dt", {}, "Assets"), h("dd", {}, `${count(list, "pending")} pending, ${count(list, "synced")} synced, ${count(list, "failed")} failed`)));
    assets = list;
    renderAssets();
  };
  every(2000, async () => { try { await refresh(); } catch (e) { show(msg, errorBox(e)); } });
  await template(tplBox, sk, edge);
}

async function template(box: HTMLElement, sk: string, edge: string) {
  const msg = h("div");
  const change = async (body: { add?: Entry[]; remove?: { def_module: string; def_name: string }[] }) => {
    try {
      const r = await api<Record<string, Entry[]>>("PUT", `/admin/edges/template/${enc(sk)}/${enc(edge)}`, body);
      render(r[edge] ?? []);
    } catch (e) { show(msg, errorBox(e)); }
  };
  const select = (options: string[], value: string, id?: string) =>
    h("select", { id }, options.map((o) => h("option", { value: o, selected: o === value }, o)));
  const render = (entries: Entry[]) => {
    const module = select(MODULES, "service", "tpl-module"), mode = select(MODES, "sync_to_edge", "tpl-mode");
    const nameIn = h("input", { id: "tpl-name", placeholder: "name or *", required: true });
    const add = h("form", { class: "row", id: "tpl-add" }, module, nameIn, mode, h("button", { type: "submit", class: "primary" }, "Add"));
    add.addEventListener("submit", (e) => {
      e.preventDefault();
      if (nameIn.value.trim()) void change({ add: [{ def_module: module.value, def_name: nameIn.value.trim(), mode: mode.value }] });
    });
    show(box, msg, table(["Module", "Name", "Mode", "Source", ""], entries.map((en) => {
      const m = select(MODES, en.mode);
      m.addEventListener("change", () => void change({ add: [{ def_module: en.def_module, def_name: en.def_name, mode: m.value, ...(en.rows !== undefined ? { rows: en.rows } : {}) }] }));
      // an entry only deployments bring is changed in its deployments, not here
      const own = (en.source ?? "edge").split(",").some((x) => x === "edge" || x.startsWith("template:"));
      const rm = own ? h("button", { class: "remove" }, "Remove") : h("span", { class: "muted" }, "");
      if (own) rm.addEventListener("click", () => void change({ remove: [{ def_module: en.def_module, def_name: en.def_name }] }));
      return h("tr", { "data-entry": `${en.def_module}/${en.def_name}`, "data-source": en.source ?? "" },
        h("td", {}, en.def_module), h("td", {}, en.def_name), h("td", {}, m), h("td", { class: "source" }, sourceText(en.source)), h("td", {}, rm));
    }), { id: "template-table" }), h("div", { class: "card" }, h("strong", {}, "Add to the template"), add));
  };
  try {
    const all = await api<Record<string, Entry[]>>("GET", `/admin/edges/template/${enc(sk)}`);
    render(all[edge] ?? []);
  } catch (e) { show(box, errorBox(e)); }
}

// ---- platform: throttling cases ----------------------------------------------------------------

async function throttling(main: HTMLElement, sk: string) {
  const name = await systemName(sk);
  bar([["Systems", "#/"], [name, `#/s/${enc(sk)}`], ["Throttling", `#/s/${enc(sk)}/throttling`]]);
  const all = await api<{ name: string; cases: Record<string, any>[] }[]>("GET", "/admin/throttlers");
  // this system's cases and the platform-wide ones (* and ?) that apply to it too
  const cases = all.flatMap((t) => t.cases.filter((c) => c.system_key === sk || !/^[0-9a-f]{20,}$/.test(String(c.system_key))));
  show(main, h("h1", {}, name), tabs(sk, "Throttling"),
    table(["Throttler", "Case", "System", "Consumer", "Resource", "Limiter", ["Max", "num"], ["Duration (s)", "num"], ["Priority", "num"], ""], cases.map((c) =>
      h("tr", { "data-case": c.case_name },
        h("td", {}, c.throttler_name), h("td", {}, c.case_name), h("td", {}, c.system_key === sk ? "this system" : c.system_key), h("td", {}, c.consumer),
        h("td", {}, h("code", {}, c.resource)), h("td", {}, c.limiter_type), h("td", { class: "num" }, c.max_num), h("td", { class: "num" }, c.duration),
        h("td", { class: "num" }, c.priority), h("td", {}, c.built_in ? pill("built-in", "warn") : ""))), { id: "throttling-table" }));
}

// ---- platform: message history ------------------------------------------------------------------

async function messages(main: HTMLElement, sk: string, topic?: string) {
  const name = await systemName(sk);
  bar([["Systems", "#/"], [name, `#/s/${enc(sk)}`], ["Messages", `#/s/${enc(sk)}/messages`]]);
  const input = h("input", { id: "topic", placeholder: "topic (exact, no wildcards)", value: topic ?? "", size: 40 });
  const form = h("form", { class: "row", id: "topic-form" }, input, h("button", { type: "submit", class: "primary" }, "Show"));
  form.addEventListener("submit", (e) => { e.preventDefault(); location.hash = `#/s/${enc(sk)}/messages/${enc(input.value.trim())}`; });
  const topics = h("div", { class: "row", id: "topics" });
  const list = h("div", { id: "history" });
  const msg = h("div");
  show(main, h("h1", {}, name), tabs(sk, "Messages"), form, topics, msg, list);
  try {
    const current = await api<string[]>("GET", `/api/v/1/message/${enc(sk)}/currentTopics`);
    show(topics, current.length ? [h("span", { class: "muted" }, "Topics:"), current.slice(0, 50).map((t) => h("a", { href: `#/s/${enc(sk)}/messages/${enc(t)}` }, t))] : []);
  } catch { /* the list of topics is a convenience */ }
  if (!topic) return;
  every(3000, async () => {
    try {
      const rows = await api<{ topicid: string; time: number; payload: string; userid: string; qos: number }[]>("GET", `/api/v/1/message/${enc(sk)}?topic=${enc(topic)}&count=50`);
      show(msg);
      show(list, table(["Time", "User", ["QoS", "num"], "Payload"], rows.map((r) =>
        h("tr", {}, h("td", { title: when(r.time) }, new Date(r.time * 1000).toLocaleTimeString()), h("td", {}, r.userid), h("td", { class: "num" }, r.qos),
          h("td", {}, h("pre", { class: "payload" }, r.payload)))), { id: "history-table" }));
    } catch (e) { show(msg, errorBox(e)); }
  });
}

// ---- edge: its own view -------------------------------------------------------------------------

async function edgeSelf(main: HTMLElement) {
  const head = h("div", { class: "card", id: "edge-self" });
  const assetsBox = h("div", { id: "assets" });
  const msg = h("div");
  show(main, h("h1", {}, "This edge"), msg, head, h("h2", {}, "Assets"), assetsBox);
  const tbl = liveTable(["Type", "Name", "Status", "Source", "Last error"], { id: "assets-table" });
  show(assetsBox, tbl.el);
  let named = false;
  every(2000, async () => {
    try {
      const st = await api<any>("GET", "/api/v/4/edge/status");
      if (!named) { bar([[`Edge ${st.edge}`, "#/"]]); named = true; }
      show(msg);
      show(head, h("dl", { class: "kv" },
        h("dt", {}, "Edge"), h("dd", {}, st.edge),
        h("dt", {}, "System"), h("dd", {}, h("code", {}, st.system_key)),
        h("dt", {}, "Platform"), h("dd", {}, st.platform_url),
        h("dt", {}, "Named template"), h("dd", { id: "edge-template" }, st.template || "none"),
        h("dt", {}, "Link"), h("dd", { id: "edge-link" }, linkPill(st.connected)),
        st.link_error && !st.connected ? [h("dt", {}, "Why"), h("dd", { id: "link-error", class: "err" }, `${st.link_error.cause}: ${st.link_error.message} (${st.link_error.attempts} tries since ${ago(st.link_error.since)})`)] : null,
        h("dt", {}, "Last contact"), h("dd", { title: when(st.last_contact) }, ago(st.last_contact)),
        h("dt", {}, "Outbox"), h("dd", { id: "outbox" }, `${st.outbox} waiting`),
        h("dt", {}, "Assets"), h("dd", {}, `${st.synced} synced, ${st.failed} failed`)));
      tbl.update((st.assets as Asset[]).map((a) => ({
        key: `${a.asset_type}/${a.asset_name}`, sig: JSON.stringify([a.status, a.last_error, a.source, a.entry]),
        make: () => h("tr", { "data-asset": `${a.asset_type}/${a.asset_name}`, "data-status": a.status },
          h("td", {}, a.asset_type), h("td", {}, a.asset_name), h("td", {}, statusPill(a.status)),
          h("td", { class: "source" }, sourceText(a.source), a.entry ? h("span", { class: "muted" }, ` (${a.entry})`) : null),
          h("td", { class: a.last_error ? "err" : "muted" }, a.last_error || "–")),
      })));
    } catch (e) { show(msg, errorBox(e)); }
  });
}

window.addEventListener("hashchange", () => void route());
void route();
