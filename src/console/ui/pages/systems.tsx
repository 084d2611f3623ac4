// The developer's systems: list, create, delete; each links to its settings (systemSettings.tsx).
import { useState } from "preact/hooks";
import { api, enc } from "../api.ts";
import { ErrorBox } from "../components/bits.tsx";
import { Form } from "../components/form.tsx";
import { ListView, pageOf } from "../components/list.tsx";
import { href } from "../router.ts";
import { useTrail } from "../trail.ts";

interface System { systemKey: string; name: string; description: string }

export function Systems() {
  useTrail([["Systems", "#/"]], []);
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<unknown>();
  const remove = async (s: System) => {
    if (!confirm(`Delete the system ${s.name} and everything in it?`)) return;
    try { await api("DELETE", `/admin/systemmanagement?id=${enc(s.systemKey)}`); setVersion((v) => v + 1); setError(undefined); } catch (e) { setError(e); }
  };
  return <>
    <h1>Systems</h1>
    <ErrorBox error={error} />
    <ListView<System> id="systems-table" label="Systems" reloadKey={version} initialSort={{ field: "name", desc: false }}
      load={async (q) => pageOf(await api<System[]>("GET", "/admin/allsystems"), q, (s) => `${s.name} ${s.description} ${s.systemKey}`, (s, f) => String(s[f as keyof System] ?? ""))}
      rowKey={(s) => s.systemKey} rowAttrs={(s) => ({ "data-system": s.systemKey })}
      columns={[
        { label: "Name", sort: "name", cell: (s) => <a href={href("s", s.systemKey)}>{s.name}</a> },
        { label: "System key", cell: (s) => <code>{s.systemKey}</code> },
        { label: "Description", sort: "description", cell: (s) => s.description },
        { label: "Actions", cell: (s) => <span class="row">
          <a href={href("s", s.systemKey, "settings")} class="settings" aria-label={`Settings of system ${s.name}`}>Settings</a>
          <button type="button" class="danger" aria-label={`Delete system ${s.name}`} onClick={() => void remove(s)}>Delete</button>
        </span> },
      ]} />
    <h2>New system</h2>
    <Form id="new-system" submit="Create system" fields={[{ name: "name", label: "Name", required: true }, { name: "description", label: "Description" }]}
      onSubmit={async (v) => { await api("POST", "/admin/systemmanagement", { name: v.name, description: v.description }); setVersion((n) => n + 1); }} />
  </>;
}
