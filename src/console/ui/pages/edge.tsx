// One edge on the platform: its link and the link's latest events, its assets' sync status with
// the cause of a failure and a retry, its template, the deployments naming it, its token (rotated here), and deleting it.
import { useEffect, useState } from "preact/hooks";
import { TEMPLATE_MODULES } from "../../../core/syncKinds.ts";
import { api, enc } from "../api.ts";
import { ErrorBox, KV, LinkPill, StatusPill, usePoll } from "../components/bits.tsx";
import { DataTable } from "../components/table.tsx";
import { ago, sourceText, when } from "../format.ts";
import { go, href } from "../router.ts";
import { useSystemName, useSystemTrail } from "../trail.ts";
import { EdgeDeployments } from "./edgeDeployments.tsx";
import { EdgeLink } from "./edgeLink.tsx";
import type { EdgeRecord } from "./fleet.tsx";

export interface Asset { asset_type: string; asset_name: string; status: string; desired_version: number; applied_version: number; attempts: number; last_error: string; updated_at: string; source?: string; entry?: string }
const count = (assets: Asset[], status: string) => assets.filter((a) => a.status === status).length;

/** The kinds of assets a template names and how they go (as the API takes them). */
const MODULES: string[] = [...TEMPLATE_MODULES];
const MODES = ["deploy", "sync_to_edge", "sync_to_platform", "sync"];
interface Entry { def_module: string; def_name: string; mode: string; rows?: boolean; source?: string }

/** A token for an edge: 32 random bytes, hex (the API keeps only its hash). */
const newToken = () => Array.from(crypto.getRandomValues(new Uint8Array(32)), (b) => b.toString(16).padStart(2, "0")).join("");

export function EdgePage({ systemKey: sk, edge }: { systemKey: string; edge: string }) {
  const name = useSystemName(sk);
  useSystemTrail(sk, name, [edge, href("s", sk, "edge", edge)]);
  const [rec, setRec] = useState<EdgeRecord>();
  const [assets, setAssets] = useState<Asset[]>([]);
  const [failedOnly, setFailedOnly] = useState(false);
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState<string>();
  const [token, setToken] = useState<string>();
  // a deployment change changes the template's entries (those it brings): the template reads again
  const [planned, setPlanned] = useState(0);
  const refresh = async () => {
    const [r, list] = await Promise.all([
      api<EdgeRecord>("GET", `/admin/edges/${enc(sk)}/${enc(edge)}`),
      api<Asset[]>("GET", `/admin/${enc(sk)}/sync/edge/status/${enc(edge)}`),
    ]);
    setRec(r);
    setAssets(list);
  };
  usePoll(2000, async () => { try { await refresh(); } catch (e) { setError(e); } }, [sk, edge]);
  const act = async (key: string, fn: () => Promise<void>) => {
    setBusy(key);
    try { await fn(); setError(undefined); } catch (e) { setError(e); } finally { setBusy(undefined); }
  };
  const retry = (body: Record<string, string>, key: string) => act(key, async () => { await api("POST", `/admin/${enc(sk)}/sync/retry`, { edge, ...body }); await refresh(); });
  const rotate = () => act("rotate", async () => {
    if (!confirm(`Give ${edge} a new token? The edge must be restarted with it; the old one stops working now.`)) return;
    const t = newToken();
    await api("PUT", `/admin/edges/${enc(sk)}/${enc(edge)}`, { token: t });
    setToken(t);
  });
  const remove = () => act("delete", async () => {
    if (!confirm(`Delete the edge ${edge}? Its record, template and sync status go.`)) return;
    await api("DELETE", `/admin/edges/${enc(sk)}/${enc(edge)}`);
    go("s", sk);
  });
  const shown = failedOnly ? assets.filter((a) => a.status === "failed") : assets;
  return <>
    <h1>Edge {edge}</h1>
    <div class="card" id="edge-head">
      {rec ? <KV items={[
        ["Link", <LinkPill connected={rec.isConnected} ever={!!rec.last_talked} />, { id: "edge-link" }],
        ["Last talked", <span title={when(rec.last_talked)}>{ago(rec.last_talked)}</span>],
        ["Sync lag", rec.sync_lag ?? "–"],
        ["Named template", rec.template || "none (its own entries only)", { id: "edge-template" }],
        ...(rec.last_refusal ? [["Last refused", `${ago(rec.last_refusal_at)}: ${rec.last_refusal}`, { id: "edge-refusal", class: "err", title: when(rec.last_refusal_at) }] as [string, string, Record<string, unknown>]] : []),
        ["Assets", `${count(assets, "pending")} pending, ${count(assets, "synced")} synced, ${count(assets, "failed")} failed`],
      ]} /> : <p class="muted">Loading…</p>}
      <div class="row actions">
        <button type="button" id="rotate-token" disabled={busy === "rotate"} onClick={() => void rotate()}>Rotate token</button>
        <button type="button" id="delete-edge" class="danger" disabled={busy === "delete"} onClick={() => void remove()}>Delete edge</button>
      </div>
      {token ? <p role="status" id="new-token">New token, shown this once: <code>{token}</code></p> : null}
    </div>
    <ErrorBox error={error} />
    <h2>Assets</h2>
    <div class="row">
      <label><input type="checkbox" id="assets-failed-only" checked={failedOnly} onChange={(e) => setFailedOnly(e.currentTarget.checked)} /> failed only</label>
      <button type="button" id="retry-all" disabled={!assets.some((a) => a.status === "failed") || busy === "all"} onClick={() => void retry({}, "all")}>Retry all failed</button>
    </div>
    <div id="assets">
      <DataTable<Asset> id="assets-table" caption="Assets" rows={shown} rowKey={(a) => `${a.asset_type}/${a.asset_name}`}
        rowAttrs={(a) => ({ "data-asset": `${a.asset_type}/${a.asset_name}`, "data-status": a.status })}
        columns={[
          { label: "Type", cell: (a) => a.asset_type }, { label: "Name", cell: (a) => a.asset_name },
          { label: "Status", cls: "status", cell: (a) => <StatusPill status={a.status} /> },
          { label: "Desired", cls: "num", cell: (a) => a.desired_version }, { label: "Applied", cls: "num", cell: (a) => a.applied_version },
          { label: "Attempts", cls: "num", cell: (a) => a.attempts },
          { label: "Source", cls: "source", cell: (a) => <span title={a.entry ?? ""}>{sourceText(a.source)}{a.entry ? <span class="muted"> ({a.entry})</span> : null}</span> },
          { label: "Last error", cls: "err", cell: (a) => <span class={a.last_error ? "err" : "muted"}>{a.last_error || "–"}</span> },
          { label: "Actions", cell: (a) => (a.status === "failed"
            ? <button type="button" class="retry" aria-label={`Retry ${a.asset_type} ${a.asset_name}`} disabled={busy === `${a.asset_type}/${a.asset_name}`}
                onClick={() => void retry({ asset_class: a.asset_type, asset_id: a.asset_name }, `${a.asset_type}/${a.asset_name}`)}>Retry</button>
            : null) },
        ]} />
    </div>
    <h2>Link</h2>
    <EdgeLink systemKey={sk} edge={edge} />
    <h2>Template</h2>
    <Template systemKey={sk} edge={edge} key={planned} />
    <h2>Deployments</h2>
    <EdgeDeployments systemKey={sk} edge={edge} changed={() => setPlanned((n) => n + 1)} />
  </>;
}

function Template({ systemKey: sk, edge }: { systemKey: string; edge: string }) {
  const [entries, setEntries] = useState<Entry[]>();
  const [error, setError] = useState<unknown>();
  const [module, setModule] = useState("service");
  const [entryName, setEntryName] = useState("");
  const [mode, setMode] = useState("sync_to_edge");
  useEffect(() => {
    api<Record<string, Entry[]>>("GET", `/admin/edges/template/${enc(sk)}`).then((all) => setEntries(all[edge] ?? []), setError);
  }, [sk, edge]);
  const change = async (body: { add?: Entry[]; remove?: { def_module: string; def_name: string }[] }) => {
    try { setEntries((await api<Record<string, Entry[]>>("PUT", `/admin/edges/template/${enc(sk)}/${enc(edge)}`, body))[edge] ?? []); setError(undefined); } catch (e) { setError(e); }
  };
  return <div id="template">
    <ErrorBox error={error} />
    <DataTable<Entry> id="template-table" caption="Template entries" rows={entries ?? []} rowKey={(e) => `${e.def_module}/${e.def_name}`}
      rowAttrs={(e) => ({ "data-entry": `${e.def_module}/${e.def_name}`, "data-source": e.source ?? "" })}
      columns={[
        { label: "Module", cell: (e) => e.def_module }, { label: "Name", cell: (e) => e.def_name },
        { label: "Mode", cell: (e) => <select aria-label={`Mode of ${e.def_module} ${e.def_name}`} value={e.mode}
            onChange={(ev) => void change({ add: [{ def_module: e.def_module, def_name: e.def_name, mode: ev.currentTarget.value, ...(e.rows !== undefined ? { rows: e.rows } : {}) }] })}>
            {MODES.map((m) => <option key={m} value={m}>{m}</option>)}</select> },
        { label: "Source", cls: "source", cell: (e) => sourceText(e.source) },
        // an entry only deployments bring is changed in its deployments, not here
        { label: "Actions", cell: (e) => ((e.source ?? "edge").split(",").some((x) => x === "edge" || x.startsWith("template:"))
          ? <button type="button" class="remove" aria-label={`Remove ${e.def_module} ${e.def_name}`}
              onClick={() => void change({ remove: [{ def_module: e.def_module, def_name: e.def_name }] })}>Remove</button>
          : <span class="muted">in a deployment</span>) },
      ]} />
    <div class="card">
      <h3 id="tpl-add-title">Add to the template</h3>
      <form class="row" id="tpl-add" aria-labelledby="tpl-add-title" onSubmit={(e) => {
        e.preventDefault();
        if (entryName.trim()) void change({ add: [{ def_module: module, def_name: entryName.trim(), mode }] });
      }}>
        <label>Kind <select id="tpl-module" value={module} onChange={(e) => setModule(e.currentTarget.value)}>{MODULES.map((m) => <option key={m} value={m}>{m}</option>)}</select></label>
        <label>Name <input id="tpl-name" placeholder="name or *" required value={entryName} onInput={(e) => setEntryName(e.currentTarget.value)} /></label>
        <label>Mode <select id="tpl-mode" value={mode} onChange={(e) => setMode(e.currentTarget.value)}>{MODES.map((m) => <option key={m} value={m}>{m}</option>)}</select></label>
        <button type="submit" class="primary">Add</button>
      </form>
    </div>
  </div>;
}
