// An edge's own console: its link to the platform, its outbox and its assets. Read-only: what an
// edge runs is decided by its platform (the template), so changes are made there.
import { useState } from "preact/hooks";
import { api } from "../api.ts";
import { ErrorBox, KV, LinkPill, StatusPill, usePoll } from "../components/bits.tsx";
import { DataTable } from "../components/table.tsx";
import { ago, sourceText, when } from "../format.ts";
import { useTrail } from "../trail.ts";
import type { Asset } from "./edge.tsx";

export function EdgeSelf() {
  const [st, setSt] = useState<any>();
  const [error, setError] = useState<unknown>();
  useTrail(st ? [[`Edge ${st.edge}`, "#/"]] : [], [st?.edge]);
  usePoll(2000, async () => {
    try { setSt(await api("GET", "/api/v/4/edge/status")); setError(undefined); } catch (e) { setError(e); }
  }, []);
  return <>
    <h1>This edge</h1>
    <p class="muted">Read-only: this edge's assets come from its platform's template; change them there.</p>
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
