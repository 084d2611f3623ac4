// A system's fleet, built for thousands of edges: counts by link state at the top, server-side
// search, filters, sort and paging, and updates by conditional polling (the API answers 304 and
// no body while nothing changed, so an idle tab costs a few hundred bytes a poll).
import { useState } from "preact/hooks";
import { api, caselessPattern, enc, poll, queryParam } from "../api.ts";
import { ErrorBox, LinkPill, Pill, Tabs, usePoll } from "../components/bits.tsx";
import { Form } from "../components/form.tsx";
import { Pager } from "../components/list.tsx";
import { DataTable, type Sorting } from "../components/table.tsx";
import { ago, when } from "../format.ts";
import { go, href } from "../router.ts";
import { useSystemName, useSystemTrail } from "../trail.ts";

export interface EdgeRecord {
  name: string; description?: string; isConnected: boolean; last_talked: number | null; first_talked?: number | null; sync_lag: number | null;
  template?: string; last_refusal?: string; last_refusal_at?: number | null; sync_counts?: { pending: number; synced: number; failed: number };
}
interface StateCounts { count: number; connected: number; never_connected: number; disconnected: number; failing: number }

const PAGE_SIZE = 50;
/** How often the page asks what changed. */
const POLL_MS = 5000;
const LINK_STATES = [["any", "Any link state"], ["connected", "Connected"], ["never_connected", "Never connected"], ["disconnected", "Disconnected"]] as const;
type LinkState = (typeof LINK_STATES)[number][0];

/** The query language's filters for the page's choices. */
function filtersOf(search: string, link: LinkState, offlineBefore: number | null): Record<string, unknown>[] {
  const f: Record<string, unknown>[] = [];
  if (search) f.push({ RE: [{ name: caselessPattern(search) }] });
  if (link === "connected") f.push({ EQ: [{ isConnected: true }] });
  if (link === "never_connected") f.push({ EQ: [{ isConnected: false }] }, { EQ: [{ last_talked: null }] });
  if (link === "disconnected" || offlineBefore !== null) f.push({ EQ: [{ isConnected: false }] }, { NEQ: [{ last_talked: null }] });
  if (offlineBefore !== null) f.push({ LTE: [{ last_talked: offlineBefore }] });
  return f;
}

export function Fleet({ systemKey: sk }: { systemKey: string }) {
  const name = useSystemName(sk);
  useSystemTrail(sk, name);
  const [typed, setTyped] = useState("");
  const [search, setSearch] = useState("");
  const [link, setLink] = useState<LinkState>("any");
  const [failedOnly, setFailedOnly] = useState(false);
  const [since, setSince] = useState("");
  const [sorting, setSorting] = useState<Sorting>({ field: "name", desc: false });
  const [page, setPage] = useState(1);
  const [rows, setRows] = useState<EdgeRecord[]>();
  const [total, setTotal] = useState<number>();
  const [counts, setCounts] = useState<StateCounts>();
  const [error, setError] = useState<unknown>();
  const [now, setNow] = useState(Date.now());
  const [created, setCreated] = useState<{ name: string; token: string }>();
  /** bumped by a change made here: the list is asked again at once */
  const [version, setVersion] = useState(0);
  const offlineBefore = since ? Math.floor(new Date(since).getTime() / 1000) : null;
  const filters = filtersOf(search, link, Number.isFinite(offlineBefore) ? offlineBefore : null);
  const failing = failedOnly ? "&failing=true" : "";

  usePoll(POLL_MS, async () => {
    try {
      const base = `/admin/edges/${enc(sk)}`;
      const [list, n, c] = await Promise.all([
        poll<EdgeRecord[]>(`${base}?view=fleet${failing}&${queryParam({ filters, sort: [sorting.field, sorting.desc ? "DESC" : "ASC"], pageSize: PAGE_SIZE, page })}`),
        poll<{ count: number }>(`/api/v/3/edges/${enc(sk)}/count?${queryParam({ filters })}${failing}`),
        poll<StateCounts>(`/api/v/3/edges/${enc(sk)}/count?by=state`),
      ]);
      if (list.changed || !rows) setRows(list.body);
      setTotal(n.body.count);
      setCounts(c.body);
      setNow(Date.now());
      setError(undefined);
    } catch (e) { setError(e); }
  }, [sk, search, link, failedOnly, since, sorting.field, sorting.desc, page, version]);

  // the rows shown stay until the new answer replaces them (no empty flash)
  const refilter = (fn: () => void) => { setPage(1); fn(); };
  const chip = (label: string, n: number | undefined, on: boolean, pick: () => void, id: string) =>
    <button type="button" id={id} class={`count${on ? " on" : ""}`} aria-pressed={on} onClick={pick}><strong>{n ?? "–"}</strong> {label}</button>;
  const pages = total === undefined ? 1 : Math.max(1, Math.ceil(total / PAGE_SIZE));
  return <>
    <h1>{name}</h1>
    <Tabs systemKey={sk} on="Edges" />
    <div class="counts" id="fleet-counts" role="group" aria-label="Edges by state">
      {chip("edges", counts?.count, link === "any" && !failedOnly, () => refilter(() => { setLink("any"); setFailedOnly(false); }), "count-all")}
      {chip("connected", counts?.connected, link === "connected", () => refilter(() => setLink("connected")), "count-connected")}
      {chip("never connected", counts?.never_connected, link === "never_connected", () => refilter(() => setLink("never_connected")), "count-never")}
      {chip("disconnected", counts?.disconnected, link === "disconnected", () => refilter(() => setLink("disconnected")), "count-disconnected")}
      {chip("failing", counts?.failing, failedOnly, () => refilter(() => setFailedOnly(!failedOnly)), "count-failing")}
    </div>
    <form class="row filters" role="search" onSubmit={(e) => { e.preventDefault(); refilter(() => setSearch(typed.trim())); }}>
      <label>Name contains <input type="search" id="edges-search" value={typed} onInput={(e) => setTyped(e.currentTarget.value)} /></label>
      <button type="submit">Search</button>
      <label>Link <select id="edges-link" value={link} onChange={(e) => refilter(() => setLink(e.currentTarget.value as LinkState))}>
        {LINK_STATES.map(([v, t]) => <option key={v} value={v}>{t}</option>)}
      </select></label>
      <label>Offline since before <input type="datetime-local" id="edges-offline-before" value={since} onChange={(e) => refilter(() => setSince(e.currentTarget.value))} /></label>
      <label><input type="checkbox" id="failed-only" checked={failedOnly} onChange={(e) => refilter(() => setFailedOnly(e.currentTarget.checked))} /> failed only</label>
    </form>
    <p class="muted" id="edges-summary" aria-live="polite">{total === undefined ? "loading…" : `${total} edges match · updated ${new Date(now).toLocaleTimeString()}`}</p>
    <ErrorBox error={error} />
    <DataTable<EdgeRecord> id="edges-table" caption="Edges" rows={rows ?? []} rowKey={(e) => e.name}
      rowAttrs={(e) => ({ "data-edge": e.name, "data-connected": String(e.isConnected) })}
      sorting={sorting} onSort={(s) => refilter(() => setSorting(s))}
      columns={[
        { label: "Edge", sort: "name", cell: (e) => <a href={href("s", sk, "edge", e.name)}>{e.name}</a> },
        { label: "Link", cls: "link", cell: (e) => <LinkPill connected={e.isConnected} ever={!!e.first_talked} /> },
        // a connected edge is talking now (the fleet view leaves its last ping out: see the API)
        { label: "Last talked", sort: "last_talked", cls: "ago", cell: (e) => (e.isConnected ? "now" : <span title={when(e.last_talked)}>{ago(e.last_talked, now)}</span>) },
        { label: "Sync lag", cls: "num", cell: (e) => e.sync_lag ?? "–" },
        { label: "Pending", cls: "num", cell: (e) => e.sync_counts?.pending ?? 0 },
        { label: "Synced", cls: "num", cell: (e) => e.sync_counts?.synced ?? 0 },
        { label: "Failed", cls: "num failed", cell: (e) => (e.sync_counts?.failed ? <Pill kind="bad">{e.sync_counts.failed}</Pill> : "0") },
      ]} />
    <Pager id="edges" page={page} pages={pages} total={total} onPage={setPage} />
    <h2>New edge</h2>
    {created ? <div class="card" id="edge-created" role="status">
      <p>Edge <strong>{created.name}</strong> created. Its token, shown this once (give it to the edge with <code>--edge-token</code>):</p>
      <p><code id="edge-created-token">{created.token}</code></p>
      <button type="button" onClick={() => go("s", sk, "edge", created.name)}>Open {created.name}</button>
    </div> : null}
    <Form id="new-edge" submit="Create edge" fields={[
      { name: "name", label: "Name", required: true, check: (v) => (/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/.test(v.trim()) ? "" : "letters, digits, _ . - (not first), at most 128") },
      { name: "description", label: "Description" },
    ]} onSubmit={async (v) => {
      const e = await api<{ name: string; token: string }>("POST", `/admin/edges/${enc(sk)}/${enc(v.name!.trim())}`, { description: v.description });
      setCreated({ name: e.name, token: e.token });
      setVersion((n) => n + 1);
    }} />
  </>;
}
