// A system's timers: the list (search, sort; the API answers it whole) with each timer's runs and
// next run, create, edit and delete. The schedule is picked as "every N units", a start (now or
// a local date and time) and how many runs; the API keeps it in seconds and RFC 3339.
import { useState } from "preact/hooks";
import { api, enc } from "../api.ts";
import { ErrorBox, Tabs, useLoad } from "../components/bits.tsx";
import { ListView, pageOf } from "../components/list.tsx";
import { go, href } from "../router.ts";
import { UNITS, everyText } from "../schedule.ts";
import { OwnedCell, OwnedDefinition, OwnedNote, usePlatformOwned } from "../components/owned.tsx";
import { useSystemName, useSystemTrail } from "../trail.ts";

interface Timer { name: string; description: string; frequency: number; repeats: number; start_time: string; service_name: string; disabled: boolean; runs: number; next_run: string | null }

const NAME_RE = /^[\w.-]+$/;
export function Timers({ systemKey: sk, name }: { systemKey: string; name?: string }) {
  const sys = useSystemName(sk);
  useSystemTrail(sk, sys, ["Timers", href("s", sk, "timers")], ...(name ? [[name, href("s", sk, "timers", name)] as [string, string]] : []));
  return <>
    <h1>{sys}</h1>
    <Tabs systemKey={sk} on="Timers" />
    {name ? <TimerDetail systemKey={sk} name={name} /> : <TimerList systemKey={sk} />}
  </>;
}

function TimerList({ systemKey: sk }: { systemKey: string }) {
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<unknown>();
  const owned = usePlatformOwned("timer");
  const remove = async (t: Timer) => {
    if (!confirm(`Delete the timer ${t.name}?`)) return;
    try { await api("DELETE", `/admin/triggers/timers/${enc(sk)}/${enc(t.name)}`); setVersion((v) => v + 1); setError(undefined); } catch (e) { setError(e); }
  };
  return <>
    <h2>Timers</h2>
    <ErrorBox error={error} />
    <ListView<Timer> id="timers-table" label="Timers" reloadKey={version} initialSort={{ field: "name", desc: false }}
      load={async (q) => pageOf(await api<Timer[]>("GET", `/admin/triggers/timers/${enc(sk)}`), q,
        (t) => `${t.name} ${t.description} ${t.service_name}`, (t, f) => (f === "frequency" || f === "runs" ? t[f] : String(t[f as keyof Timer] ?? "")))}
      rowKey={(t) => t.name} rowAttrs={(t) => ({ "data-timer": t.name })}
      columns={[
        { label: "Name", sort: "name", cell: (t) => <a href={href("s", sk, "timers", t.name)}>{t.name}</a> },
        { label: "Schedule", sort: "frequency", cell: (t) => `${everyText(t.frequency)}, ${t.repeats < 0 ? "forever" : `${t.repeats} times`}` },
        { label: "Service", sort: "service_name", cell: (t) => (t.service_name ? <a href={href("s", sk, "services", t.service_name)}>{t.service_name}</a> : <span class="muted">publishes on $timer/{t.name}</span>) },
        { label: "Runs", cls: "num", sort: "runs", cell: (t) => t.runs },
        { label: "Next run", cell: (t) => (t.disabled ? "disabled" : t.next_run ? new Date(t.next_run).toLocaleString() : "done") },
        { label: "Actions", cell: (t) => (owned(t.name) ? <OwnedCell reason={owned(t.name)} />
          : <button type="button" class="danger" aria-label={`Delete timer ${t.name}`} onClick={() => void remove(t)}>Delete</button>) },
      ]} />
    <h2>New timer</h2>
    <TimerForm systemKey={sk} onSaved={(n) => go("s", sk, "timers", n)} />
  </>;
}

function TimerDetail({ systemKey: sk, name }: { systemKey: string; name: string }) {
  const t = useLoad(() => api<Timer>("GET", `/admin/triggers/timers/${enc(sk)}/${enc(name)}`), [sk, name]);
  const [saved, setSaved] = useState<string>();
  const owned = usePlatformOwned("timer")(name);
  return <>
    <h2>Timer {name}</h2>
    <OwnedNote reason={owned} />
    <ErrorBox error={t.error} />
    {t.data ? <>
      <p class="muted" id="timer-state">{t.data.runs} runs so far · next {t.data.disabled ? "never (disabled)" : t.data.next_run ? new Date(t.data.next_run).toLocaleString() : "never (done)"}</p>
      {owned ? <OwnedDefinition id="timer-definition" label={`Timer ${name}`} value={t.data} /> : <TimerForm systemKey={sk} timer={t.data} key={name} onSaved={() => { setSaved(new Date().toLocaleTimeString()); void t.reload(); }} />}
    </> : null}
    {saved ? <p role="status" id="timer-saved">saved at {saved}</p> : null}
  </>;
}

/** A local date-time input's value for an RFC 3339 time. */
const localInput = (iso: string) => {
  const d = new Date(iso);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
};

function TimerForm({ systemKey: sk, timer, onSaved }: { systemKey: string; timer?: Timer; onSaved: (name: string) => void }) {
  const services = useLoad(() => api<{ code: string[] }>("GET", `/admin/code/v/1/${enc(sk)}`).then((r) => r.code), [sk]);
  const [unitName, unitSize] = timer ? [...UNITS].reverse().find(([, n]) => timer.frequency % n === 0)! : UNITS[1]!;
  const [v, setV] = useState({
    name: "", description: timer?.description ?? "", every: timer ? String(timer.frequency / unitSize) : "5", unit: unitName,
    start: timer ? localInput(timer.start_time) : "", repeats: timer && timer.repeats >= 0 ? String(timer.repeats) : "", service: timer?.service_name ?? "", enabled: !timer?.disabled,
  });
  const [problems, setProblems] = useState<Record<string, string>>({});
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const set = (k: keyof typeof v, x: string | boolean) => setV((o) => ({ ...o, [k]: x }));
  const id = timer ? "edit-timer" : "new-timer";
  const send = async (e: Event) => {
    e.preventDefault();
    const found: Record<string, string> = {};
    if (!timer && !NAME_RE.test(v.name.trim())) found.name = "a name: letters, digits, _, - and .";
    const every = Number(v.every);
    if (!Number.isInteger(every) || every < 1) found.every = "a whole number, 1 or more";
    const repeats = v.repeats.trim() ? Number(v.repeats) : -1;
    if (!Number.isInteger(repeats) || repeats < -1 || repeats === 0) found.repeats = "empty (forever) or a whole number of runs";
    setProblems(found);
    if (Object.keys(found).length) return;
    setBusy(true);
    try {
      const n = timer?.name ?? v.name.trim();
      const body: Record<string, unknown> = {
        description: v.description, frequency: every * UNITS.find(([u]) => u === v.unit)![1], repeats,
        start_time: v.start ? new Date(v.start).toISOString() : "now", service_name: v.service, disabled: !v.enabled,
      };
      await api(timer ? "PUT" : "POST", `/admin/triggers/timers/${enc(sk)}/${enc(n)}`, body);
      setError(undefined);
      onSaved(n);
    } catch (err) { setError(err); } finally { setBusy(false); }
  };
  const field = (k: "name" | "description" | "every" | "repeats", label: string, attrs: Record<string, unknown> = {}) => <div class="field">
    <label for={`${id}-${k}`}>{label}</label>
    <input id={`${id}-${k}`} value={v[k]} aria-invalid={problems[k] ? true : undefined} aria-describedby={problems[k] ? `${id}-${k}-problem` : undefined}
      onInput={(e) => set(k, e.currentTarget.value)} {...attrs} />
    {problems[k] ? <span class="problem" id={`${id}-${k}-problem`}>{problems[k]}</span> : null}
  </div>;
  return <form id={id} class="card form" onSubmit={send} noValidate>
    {timer ? null : field("name", "Name *")}
    {field("description", "Description")}
    <div class="inline-form">
      {field("every", "Every", { type: "number", min: 1, inputMode: "numeric" })}
      <div class="field">
        <label for={`${id}-unit`}>Unit</label>
        <select id={`${id}-unit`} value={v.unit} onChange={(e) => set("unit", e.currentTarget.value)}>{UNITS.map(([u]) => <option key={u} value={u}>{u}</option>)}</select>
      </div>
    </div>
    <div class="field">
      <label for={`${id}-start`}>Start (empty: now)</label>
      <input id={`${id}-start`} type="datetime-local" value={v.start} onInput={(e) => set("start", e.currentTarget.value)} />
    </div>
    {field("repeats", "Runs (empty: forever)", { inputMode: "numeric" })}
    <div class="field">
      <label for={`${id}-service`}>Service to run</label>
      <select id={`${id}-service`} value={v.service} onChange={(e) => set("service", e.currentTarget.value)}>
        <option value="">none: publish on $timer/&lt;name&gt;</option>
        {(services.data ?? []).map((s) => <option key={s} value={s}>{s}</option>)}
      </select>
    </div>
    <div class="field">
      <label><input type="checkbox" id={`${id}-enabled`} checked={v.enabled} onChange={(e) => set("enabled", e.currentTarget.checked)} /> Enabled</label>
    </div>
    <ErrorBox error={error} />
    <button type="submit" class="primary" disabled={busy}>{timer ? "Save timer" : "Create timer"}</button>
  </form>;
}
