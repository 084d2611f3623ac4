// A system's deployments (named sets of assets many edges share): the list (create, delete), and
// one deployment: its description, its assets (add with a mode, remove), its edges (add,
// remove), and its status per edge and per asset, asked again every 5 s.
import { useState } from "preact/hooks";
import { api, enc } from "../api.ts";
import { ErrorBox, Pill, StatusPill, Tabs, useLoad, usePoll } from "../components/bits.tsx";
import { Form } from "../components/form.tsx";
import { ListView, pageOf } from "../components/list.tsx";
import { DataTable } from "../components/table.tsx";
import { go, href } from "../router.ts";
import { useSystemName, useSystemTrail } from "../trail.ts";

interface Asset { asset_class: string; asset_id: string; sync_to_edge: boolean; sync_to_platform: boolean }
interface Deployment { name: string; description: string; assets?: Asset[]; edges?: string[] }
interface AssetState { asset_class: string; asset_id: string; asset_type: string; asset_name: string; status: string; desired_version: number; applied_version: number; last_error: string; attempts: number }
interface EdgeState { edge_name: string; exists: boolean; connected: boolean; status: string; assets: AssetState[] }
/** A row of the status table: an asset on an edge, or an edge with none (yet). */
interface StatusRow { e: EdgeState; a?: AssetState }
interface Status { synced: number; pending: number; failed: number; edges: EdgeState[] }

const MODES = ["deploy", "sync_to_edge", "sync_to_platform", "sync"];
const modeOf = (a: Asset) => (a.sync_to_edge && a.sync_to_platform ? "sync" : a.sync_to_edge ? "sync_to_edge" : a.sync_to_platform ? "sync_to_platform" : "deploy");

export function Deployments({ systemKey: sk, name }: { systemKey: string; name?: string }) {
  const sys = useSystemName(sk);
  useSystemTrail(sk, sys, ["Deployments", href("s", sk, "deployments")], ...(name ? [[name, href("s", sk, "deployments", name)] as [string, string]] : []));
  return <>
    <h1>{sys}</h1>
    <Tabs systemKey={sk} on="Deployments" />
    {name ? <DeploymentDetail systemKey={sk} name={name} /> : <DeploymentList systemKey={sk} />}
  </>;
}

function DeploymentList({ systemKey: sk }: { systemKey: string }) {
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<unknown>();
  const remove = async (n: string) => {
    if (!confirm(`Delete the deployment ${n}? Its edges drop what no other source brings them.`)) return;
    try { await api("DELETE", `/admin/${enc(sk)}/deployments/${enc(n)}`); setVersion((v) => v + 1); setError(undefined); } catch (e) { setError(e); }
  };
  return <>
    <h2>Deployments</h2>
    <ErrorBox error={error} />
    <ListView<Deployment> id="deployments-table" label="Deployments" reloadKey={version} initialSort={{ field: "name", desc: false }}
      load={async (q) => pageOf(await api<Deployment[]>("GET", `/admin/${enc(sk)}/deployments`), q, (d) => `${d.name} ${d.description}`, (d, f) => String(d[f as "name"] ?? ""))}
      rowKey={(d) => d.name} rowAttrs={(d) => ({ "data-deployment": d.name })}
      columns={[
        { label: "Name", sort: "name", cell: (d) => <a href={href("s", sk, "deployments", d.name)}>{d.name}</a> },
        { label: "Description", sort: "description", cell: (d) => d.description },
        { label: "Actions", cell: (d) => <button type="button" class="danger" aria-label={`Delete deployment ${d.name}`} onClick={() => void remove(d.name)}>Delete</button> },
      ]} />
    <h2>New deployment</h2>
    <Form id="new-deployment" submit="Create deployment" fields={[
      { name: "name", label: "Name", required: true },
      { name: "description", label: "Description" },
      { name: "edges", label: "Edges (comma-separated names)" },
    ]} onSubmit={async (v) => {
      const n = v.name!.trim();
      await api("POST", `/admin/${enc(sk)}/deployments`, { name: n, description: v.description, assets: [], edges: v.edges!.split(",").map((e) => e.trim()).filter(Boolean) });
      go("s", sk, "deployments", n);
    }} />
  </>;
}

function DeploymentDetail({ systemKey: sk, name }: { systemKey: string; name: string }) {
  const path = `/admin/${enc(sk)}/deployments/${enc(name)}`;
  const dep = useLoad(() => api<Deployment>("GET", path), [sk, name]);
  const [status, setStatus] = useState<Status>();
  const [statusError, setStatusError] = useState<unknown>();
  const [error, setError] = useState<unknown>();
  const loadStatus = async () => {
    try { setStatus(await api<Status>("GET", `/admin/${enc(sk)}/sync/deployment/status/${enc(name)}`)); setStatusError(undefined); } catch (e) { setStatusError(e); }
  };
  usePoll(5000, loadStatus, [sk, name]);
  const change = async (body: unknown) => { await api("PUT", path, body); await dep.reload(); await loadStatus(); };
  const tryChange = async (body: unknown) => { try { await change(body); setError(undefined); } catch (e) { setError(e); } };
  const d = dep.data;
  const rows: StatusRow[] = (status?.edges ?? []).flatMap((e) => (e.assets.length ? e.assets.map((a) => ({ e, a })) : [{ e }]));
  return <>
    <h2>Deployment {name}</h2>
    <ErrorBox error={dep.error ?? error} />
    {d ? <>
      <Form key={d.description} id="deployment-description" cls="card form inline-form" submit="Save description" fields={[{ name: "description", label: "Description", value: d.description }]}
        onSubmit={(v) => change({ description: v.description })} />
      <h3>Assets</h3>
      <DataTable<Asset> id="assets-table" caption="Assets" rows={d.assets ?? []} rowKey={(a) => `${a.asset_class}/${a.asset_id}`} rowAttrs={(a) => ({ "data-asset": `${a.asset_class}/${a.asset_id}` })}
        columns={[
          { label: "Class", cell: (a) => a.asset_class },
          { label: "Asset", cell: (a) => a.asset_id || <span class="muted">all, now and later</span> },
          { label: "Mode", cell: modeOf },
          { label: "Actions", cell: (a) => <button type="button" class="danger" aria-label={`Remove asset ${a.asset_class} ${a.asset_id || "(all)"}`}
            onClick={() => void tryChange({ assets: { remove: [{ asset_class: a.asset_class, asset_id: a.asset_id }] } })}>Remove</button> },
        ]} />
      <Form id="add-asset" cls="card form inline-form" submit="Add asset" fields={[
        { name: "asset_class", label: "Class (or a collection's name)", required: true, placeholder: "services, libraries, readings…" },
        { name: "asset_id", label: "Name (empty: all of the class)" },
        { name: "mode", label: "Mode", type: "select", options: MODES },
      ]} onSubmit={(v) => change({ assets: { add: [{ asset_class: v.asset_class!.trim(), asset_id: v.asset_id!.trim(),
        sync_to_edge: v.mode === "sync" || v.mode === "sync_to_edge", sync_to_platform: v.mode === "sync" || v.mode === "sync_to_platform" }] } })} />
      <h3>Edges</h3>
      <DataTable<string> id="deployment-edges" caption="Edges" rows={d.edges ?? []} rowKey={(e) => e} rowAttrs={(e) => ({ "data-edge": e })}
        columns={[
          { label: "Edge", cell: (e) => <a href={href("s", sk, "edge", e)}>{e}</a> },
          { label: "Actions", cell: (e) => <button type="button" class="danger" aria-label={`Remove edge ${e}`} onClick={() => void tryChange({ edges: { remove: [e] } })}>Remove</button> },
        ]} />
      <Form id="add-edge" cls="card form inline-form" submit="Add edge" fields={[{ name: "edge", label: "Edge name", required: true }]}
        onSubmit={(v) => change({ edges: { add: [v.edge!.trim()] } })} />
    </> : null}
    <h3>Status</h3>
    <ErrorBox error={statusError} />
    {status ? <p id="deployment-counts" class="row">
      <Pill kind="ok">{status.synced} synced</Pill><Pill kind="warn">{status.pending} pending</Pill><Pill kind="bad">{status.failed} failed</Pill>
    </p> : null}
    <DataTable<StatusRow> id="deployment-status" caption="Status per edge and asset" rows={rows} rowKey={(r) => `${r.e.edge_name}/${r.a ? `${r.a.asset_type}/${r.a.asset_name}` : ""}`}
      rowAttrs={(r) => ({ "data-status-of": `${r.e.edge_name}/${r.a ? `${r.a.asset_type}/${r.a.asset_name}` : ""}`, "data-status": r.a?.status ?? r.e.status })}
      columns={[
        { label: "Edge", cell: (r) => <>{r.e.edge_name} {r.e.exists ? <Pill kind={r.e.connected ? "ok" : "bad"}>{r.e.connected ? "connected" : "disconnected"}</Pill> : <Pill kind="warn">no such edge yet</Pill>}</> },
        { label: "Asset", cell: (r) => (r.a ? `${r.a.asset_type} ${r.a.asset_name}` : "–") },
        { label: "Status", cell: (r) => (r.a ? <StatusPill status={r.a.status} /> : r.e.status) },
        { label: "Versions", cls: "num", cell: (r) => (r.a ? `${r.a.applied_version} / ${r.a.desired_version}` : "") },
        { label: "Last error", cell: (r) => <span class="err">{r.a?.last_error ?? ""}</span> },
      ]} />
  </>;
}
