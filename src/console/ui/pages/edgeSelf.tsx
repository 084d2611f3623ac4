// An edge's own page: its link to the platform, its outbox and the assets its platform sent (those
// are the platform's: changed there). Its system's other pages are in the tabs.
import { useState } from "preact/hooks";
import { api } from "../api.ts";
import { ErrorBox, KV, LinkPill, StatusPill, Tabs, usePoll } from "../components/bits.tsx";
import { DataTable } from "../components/table.tsx";
import { ago, sourceText, when } from "../format.ts";
import { useEdgeScope } from "../components/owned.tsx";
import { useTrail } from "../trail.ts";
import type { Asset } from "./edge.tsx";

export function EdgeSelf() {
  const [st, setSt] = useState<any>();
  const [error, setError] = useState<unknown>();
  const scope = useEdgeScope();
  useTrail(st ? [[`Edge ${st.edge}`, "#/"]] : [], [st?.edge]);
  usePoll(2000, async () => {
    try { setSt(await api("GET", "/api/v/4/edge/status")); setError(undefined); } catch (e) { setError(e); }
  }, []);
  return <>
    <h1>This edge</h1>
    {scope ? <Tabs systemKey={scope.systemKey} on="This edge" /> : null}
    <p class="muted">The assets below come from the platform (this edge's template and deployments): their pages show them read-only; change them there. What is made on this edge is changed here.</p>
    <ErrorBox error={error} />
    {st ? <div class="card" id="edge-self"><KV items={[
      ["Edge", st.edge], ["System", <code>{st.system_key}</code>], ["Platform", st.platform_url],
      ["Named template", st.template || "none", { id: "edge-template" }],
      ["Link", <LinkPill connected={st.connected} />, { id: "edge-link" }],
      ...(st.link_error && !st.connected ? [["Why", `${st.link_error.cause}: ${st.link_error.message} (${st.link_error.attempts} tries since ${ago(st.link_error.since)})`, { id: "link-error", class: "err" }] as [string, string, Record<string, unknown>]] : []),
      ["Last contact", <span title={when(st.last_contact)}>{ago(st.last_contact)}</span>],
      ["Outbox", `${st.outbox} waiting`, { id: "outbox" }],
      ["Assets", `${st.synced} synced, ${st.failed} failed`],
    ]} /></div> : null}
    <h2>Assets</h2>
    <div id="assets">
      <DataTable<Asset> id="assets-table" caption="Assets" rows={(st?.assets as Asset[]) ?? []} rowKey={(a) => `${a.asset_type}/${a.asset_name}`}
        rowAttrs={(a) => ({ "data-asset": `${a.asset_type}/${a.asset_name}`, "data-status": a.status })}
        columns={[
          { label: "Type", cell: (a) => a.asset_type }, { label: "Name", cell: (a) => a.asset_name },
          { label: "Status", cell: (a) => <StatusPill status={a.status} /> },
          { label: "Source", cls: "source", cell: (a) => <span title={a.entry ?? ""}>{sourceText(a.source)}{a.entry ? <span class="muted"> ({a.entry})</span> : null}</span> },
          { label: "Last error", cls: "err", cell: (a) => <span class={a.last_error ? "err" : "muted"}>{a.last_error || "–"}</span> },
        ]} />
    </div>
  </>;
}
