// On an edge's page: the system's deployments that name the edge, removing it from one and adding
// it to another, through the deployments API (a change re-plans the edge's assets at once).
import { useState } from "preact/hooks";
import { api, enc } from "../api.ts";
import { ErrorBox, useLoad } from "../components/bits.tsx";
import { DataTable } from "../components/table.tsx";
import { href } from "../router.ts";

interface Deployment { name: string; description: string; edges: string[]; assets: { asset_class: string; asset_id: string }[] }

export function EdgeDeployments({ systemKey: sk, edge, changed }: { systemKey: string; edge: string; changed?: () => void }) {
  // the list names deployments only; each one read whole says which edges it names
  const all = useLoad(async () => {
    const names = await api<{ name: string }[]>("GET", `/admin/${enc(sk)}/deployments`);
    return Promise.all(names.map((d) => api<Deployment>("GET", `/admin/${enc(sk)}/deployments/${enc(d.name)}`)));
  }, [sk]);
  const [pick, setPick] = useState("");
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const change = async (deployment: string, edges: { add?: string[]; remove?: string[] }) => {
    setBusy(true);
    try { await api("PUT", `/admin/${enc(sk)}/deployments/${enc(deployment)}`, { edges }); setError(undefined); await all.reload(); changed?.(); } catch (e) { setError(e); } finally { setBusy(false); }
  };
  const held = (all.data ?? []).filter((d) => d.edges.includes(edge));
  const others = (all.data ?? []).filter((d) => !d.edges.includes(edge));
  const chosen = others.some((d) => d.name === pick) ? pick : (others[0]?.name ?? "");
  const assetText = (d: Deployment) => (d.assets.length ? d.assets.map((a) => (a.asset_id ? `${a.asset_class} ${a.asset_id}` : `all ${a.asset_class}`)).join(", ") : "none");
  return <div id="edge-deployments">
    <ErrorBox error={all.error} />
    <DataTable<Deployment> id="edge-deployments-table" caption={`Deployments naming ${edge}`} rows={held} rowKey={(d) => d.name} rowAttrs={(d) => ({ "data-deployment": d.name })}
      columns={[
        { label: "Deployment", cell: (d) => <a href={href("s", sk, "deployments", d.name)}>{d.name}</a> },
        { label: "Description", cell: (d) => d.description || "–" },
        { label: "Assets", cell: (d) => assetText(d) },
        { label: "Actions", cell: (d) => <button type="button" class="remove" disabled={busy} aria-label={`Remove ${edge} from deployment ${d.name}`}
            onClick={() => void change(d.name, { remove: [edge] })}>Remove</button> },
      ]} />
    <form class="row" id="edge-deployment-add" onSubmit={(e) => { e.preventDefault(); if (chosen) void change(chosen, { add: [edge] }); }}>
      <label>Deployment <select id="edge-deployment-pick" value={chosen} disabled={!others.length} onChange={(e) => setPick(e.currentTarget.value)}>
        {others.map((d) => <option key={d.name} value={d.name}>{d.name}</option>)}
      </select></label>
      <button type="submit" class="primary" disabled={busy || !chosen}>Add to deployment</button>
      {all.data && !others.length ? <span class="muted">{all.data.length ? "every deployment names this edge" : "the system has no deployments"}</span> : null}
    </form>
    <ErrorBox error={error} />
  </div>;
}
