// A system's triggers: the list (search, sort; the API answers it whole), create, edit and
// delete. A trigger's event is picked from the API's definitions (a module, then one of its
// events), and each event offers the filters it takes (key_value_pairs) as fields.
import { useState } from "preact/hooks";
import { api, enc } from "../api.ts";
import { ErrorBox, Tabs, useLoad } from "../components/bits.tsx";
import { ListView, pageOf } from "../components/list.tsx";
import { go, href } from "../router.ts";
import { OwnedCell, OwnedDefinition, OwnedNote, usePlatformOwned } from "../components/owned.tsx";
import { useSystemName, useSystemTrail } from "../trail.ts";

interface Definition { def_module: string; def_name: string; def_keys: string[] }
interface Trigger { name: string; def_module: string; def_name: string; key_value_pairs: Record<string, string>; service_name: string; disabled: boolean }

const NAME_RE = /^[\w.-]+$/;

export function Triggers({ systemKey: sk, name }: { systemKey: string; name?: string }) {
  const sys = useSystemName(sk);
  useSystemTrail(sk, sys, ["Triggers", href("s", sk, "triggers")], ...(name ? [[name, href("s", sk, "triggers", name)] as [string, string]] : []));
  return <>
    <h1>{sys}</h1>
    <Tabs systemKey={sk} on="Triggers" />
    {name ? <TriggerDetail systemKey={sk} name={name} /> : <TriggerList systemKey={sk} />}
  </>;
}

function TriggerList({ systemKey: sk }: { systemKey: string }) {
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<unknown>();
  const owned = usePlatformOwned("trigger");
  const remove = async (t: Trigger) => {
    if (!confirm(`Delete the trigger ${t.name}?`)) return;
    try { await api("DELETE", `/admin/triggers/handlers/${enc(sk)}/${enc(t.name)}`); setVersion((v) => v + 1); setError(undefined); } catch (e) { setError(e); }
  };
  return <>
    <h2>Triggers</h2>
    <ErrorBox error={error} />
    <ListView<Trigger> id="triggers-table" label="Triggers" reloadKey={version} initialSort={{ field: "name", desc: false }}
      load={async (q) => pageOf(await api<Trigger[]>("GET", `/admin/triggers/handlers/${enc(sk)}`), q,
        (t) => `${t.name} ${t.def_module} ${t.def_name} ${t.service_name}`, (t, f) => String(t[f as keyof Trigger] ?? ""))}
      rowKey={(t) => t.name} rowAttrs={(t) => ({ "data-trigger": t.name })}
      columns={[
        { label: "Name", sort: "name", cell: (t) => <a href={href("s", sk, "triggers", t.name)}>{t.name}</a> },
        { label: "Event", sort: "def_name", cell: (t) => `${t.def_module} · ${t.def_name}` },
        { label: "Filters", cell: (t) => Object.entries(t.key_value_pairs).map(([k, v]) => `${k}=${v}`).join(", ") || "–" },
        { label: "Service", sort: "service_name", cell: (t) => <a href={href("s", sk, "services", t.service_name)}>{t.service_name}</a> },
        { label: "Enabled", cell: (t) => (t.disabled ? "no" : "yes") },
        { label: "Actions", cell: (t) => (owned(t.name) ? <OwnedCell reason={owned(t.name)} />
          : <button type="button" class="danger" aria-label={`Delete trigger ${t.name}`} onClick={() => void remove(t)}>Delete</button>) },
      ]} />
    <h2>New trigger</h2>
    <TriggerForm systemKey={sk} onSaved={(n) => go("s", sk, "triggers", n)} />
  </>;
}

function TriggerDetail({ systemKey: sk, name }: { systemKey: string; name: string }) {
  const t = useLoad(() => api<Trigger>("GET", `/admin/triggers/handlers/${enc(sk)}/${enc(name)}`), [sk, name]);
  const [saved, setSaved] = useState<string>();
  const owned = usePlatformOwned("trigger")(name);
  return <>
    <h2>Trigger {name}</h2>
    <OwnedNote reason={owned} />
    <ErrorBox error={t.error} />
    {t.data && owned ? <OwnedDefinition id="trigger-definition" label={`Trigger ${name}`} value={t.data} />
      : t.data ? <TriggerForm systemKey={sk} trigger={t.data} key={name} onSaved={() => { setSaved(new Date().toLocaleTimeString()); void t.reload(); }} /> : null}
    {saved ? <p role="status" id="trigger-saved">saved at {saved}</p> : null}
  </>;
}

/** Creates a trigger, or edits `trigger` (its name stays). */
function TriggerForm({ systemKey: sk, trigger, onSaved }: { systemKey: string; trigger?: Trigger; onSaved: (name: string) => void }) {
  const defs = useLoad(() => api<Definition[]>("GET", "/admin/triggers/definitions"), []);
  const services = useLoad(() => api<{ code: string[] }>("GET", `/admin/code/v/1/${enc(sk)}`).then((r) => r.code), [sk]);
  const [name, setName] = useState(trigger?.name ?? "");
  const [module, setModule] = useState(trigger?.def_module ?? "Data");
  const [event, setEvent] = useState(trigger?.def_name ?? "");
  const [filters, setFilters] = useState<Record<string, string>>(trigger?.key_value_pairs ?? {});
  const [service, setService] = useState(trigger?.service_name ?? "");
  const [enabled, setEnabled] = useState(!trigger?.disabled);
  const [problem, setProblem] = useState("");
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const modules = [...new Set((defs.data ?? []).map((d) => d.def_module))];
  const events = (defs.data ?? []).filter((d) => d.def_module === module);
  const def = events.find((d) => d.def_name === event) ?? events[0];
  const svc = service || services.data?.[0] || "";
  const id = trigger ? "edit-trigger" : "new-trigger";
  const send = async (e: Event) => {
    e.preventDefault();
    const n = name.trim();
    setProblem(!trigger && !NAME_RE.test(n) ? "a name: letters, digits, _, - and ." : "");
    if (!trigger && !NAME_RE.test(n)) return;
    if (!def) return;
    setBusy(true);
    try {
      const kvp = Object.fromEntries(def.def_keys.map((k) => [k, (filters[k] ?? "").trim()]).filter(([, v]) => v));
      const body = { def_module: def.def_module, def_name: def.def_name, key_value_pairs: kvp, service_name: svc, disabled: !enabled };
      await api(trigger ? "PUT" : "POST", `/admin/triggers/handlers/${enc(sk)}/${enc(trigger?.name ?? n)}`, body);
      setError(undefined);
      onSaved(trigger?.name ?? n);
    } catch (err) { setError(err); } finally { setBusy(false); }
  };
  return <form id={id} class="card form" onSubmit={send} noValidate>
    <ErrorBox error={defs.error} />
    {trigger ? null : <div class="field">
      <label for={`${id}-name`}>Name<span aria-hidden="true"> *</span></label>
      <input id={`${id}-name`} value={name} aria-invalid={problem ? true : undefined} aria-describedby={problem ? `${id}-name-problem` : undefined} onInput={(e) => setName(e.currentTarget.value)} />
      {problem ? <span class="problem" id={`${id}-name-problem`}>{problem}</span> : null}
    </div>}
    <div class="field">
      <label for={`${id}-module`}>Event source</label>
      <select id={`${id}-module`} value={module} onChange={(e) => { setModule(e.currentTarget.value); setEvent(""); setFilters({}); }}>
        {modules.map((m) => <option key={m} value={m}>{m}</option>)}
      </select>
    </div>
    <div class="field">
      <label for={`${id}-event`}>Event</label>
      <select id={`${id}-event`} value={def?.def_name ?? ""} onChange={(e) => { setEvent(e.currentTarget.value); setFilters({}); }}>
        {events.map((d) => <option key={d.def_name} value={d.def_name}>{d.def_name}</option>)}
      </select>
    </div>
    {def?.def_keys.length ? <fieldset class="field">
      <legend>Only when (empty: any)</legend>
      {def.def_keys.map((k) => <div class="field" key={k}>
        <label for={`${id}-kv-${k}`}>{k}</label>
        <input id={`${id}-kv-${k}`} value={filters[k] ?? ""} onInput={(e) => { const v = e.currentTarget.value; setFilters((f) => ({ ...f, [k]: v })); }} />
      </div>)}
    </fieldset> : null}
    <div class="field">
      <label for={`${id}-service`}>Service to run</label>
      <select id={`${id}-service`} value={svc} onChange={(e) => setService(e.currentTarget.value)}>
        {(services.data ?? []).map((s) => <option key={s} value={s}>{s}</option>)}
      </select>
      {services.data && !services.data.length ? <span class="problem">this system has no service yet: create one first</span> : null}
    </div>
    <div class="field">
      <label><input type="checkbox" id={`${id}-enabled`} checked={enabled} onChange={(e) => setEnabled(e.currentTarget.checked)} /> Enabled</label>
    </div>
    <ErrorBox error={error} />
    <button type="submit" class="primary" disabled={busy}>{trigger ? "Save trigger" : "Create trigger"}</button>
  </form>;
}
