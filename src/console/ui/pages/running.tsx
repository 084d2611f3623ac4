// A system's running code: the runs under way on this node (stream services among them), asked
// again every 3 s; a run is stopped with Stop. A stream service stopped so is not restarted
// until it is saved again.
import { useState } from "preact/hooks";
import { api, enc } from "../api.ts";
import { ErrorBox, Pill, Tabs, usePoll } from "../components/bits.tsx";
import { DataTable } from "../components/table.tsx";
import { ago } from "../format.ts";
import { href } from "../router.ts";
import { useSystemName, useSystemTrail } from "../trail.ts";

interface Instance { instance_id: string; service_name: string; started_at: string; user_id: string; stream: boolean }

export function Running({ systemKey: sk }: { systemKey: string }) {
  const sys = useSystemName(sk);
  useSystemTrail(sk, sys, ["Running", href("s", sk, "running")]);
  const [runs, setRuns] = useState<Instance[]>();
  const [error, setError] = useState<unknown>();
  const [search, setSearch] = useState("");
  const load = async () => {
    try {
      const all = Object.values(await api<Record<string, Instance>>("GET", `/codeadmin/v/3/running/${enc(sk)}`));
      setRuns(all.sort((a, b) => a.started_at.localeCompare(b.started_at)));
      setError(undefined);
    } catch (e) { setError(e); }
  };
  usePoll(3000, load, [sk]);
  const stop = async (r: Instance) => {
    if (!confirm(`Stop this run of ${r.service_name}?`)) return;
    try { await api("DELETE", `/codeadmin/v/3/running/${enc(sk)}?id=${enc(r.instance_id)}`); await load(); } catch (e) { setError(e); }
  };
  const shown = (runs ?? []).filter((r) => r.service_name.toLowerCase().includes(search.trim().toLowerCase()));
  return <>
    <h1>{sys}</h1>
    <Tabs systemKey={sk} on="Running" />
    <h2>Running code</h2>
    <p class="muted">Runs under way on this node, stream services among them; the list is asked again every 3 s.</p>
    <div class="row"><label>Service name contains <input type="search" id="running-search" value={search} onInput={(e) => setSearch(e.currentTarget.value)} /></label>
      <span id="running-count" aria-live="polite">{runs ? `${shown.length} running` : ""}</span></div>
    <ErrorBox error={error} />
    <DataTable<Instance> id="running-table" caption="Running code" rows={shown} rowKey={(r) => r.instance_id} rowAttrs={(r) => ({ "data-service": r.service_name, "data-instance": r.instance_id })}
      columns={[
        { label: "Service", cell: (r) => <a href={href("s", sk, "services", r.service_name)}>{r.service_name}</a> },
        { label: "Kind", cell: (r) => (r.stream ? <Pill kind="warn">stream</Pill> : "run") },
        { label: "Started", cell: (r) => <span title={new Date(r.started_at).toLocaleString()}>{ago(Date.parse(r.started_at) / 1000)}</span> },
        { label: "Instance", cell: (r) => <code>{r.instance_id}</code> },
        { label: "Actions", cell: (r) => <button type="button" class="danger" aria-label={`Stop ${r.service_name} run ${r.instance_id}`} onClick={() => void stop(r)}>Stop</button> },
      ]} />
  </>;
}
