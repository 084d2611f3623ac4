// A system's code services: the list (create, delete), and one service: its code in an editor
// (saved through the API, which refuses code that does not compile and says where), run with
// parameters, the run's result, and the logs of its runs.
import { useState } from "preact/hooks";
import { CallError, api, enc } from "../api.ts";
import { ErrorBox, Tabs, useLoad } from "../components/bits.tsx";
import { CodeEditor } from "../components/code.tsx";
import { Form } from "../components/form.tsx";
import { ListView, pageOf } from "../components/list.tsx";
import { DataTable } from "../components/table.tsx";
import { OwnedCell, OwnedNote, usePlatformOwned } from "../components/owned.tsx";
import { go, href } from "../router.ts";
import { useSystemName, useSystemTrail } from "../trail.ts";

interface Service { name: string; code: string; params: string[]; logging_enabled: boolean; current_version: number }
interface Log { id: string; log: string; service_execution_time: string; duration_ms: number; success: boolean }

const STARTER = (name: string) => `function ${name}(req, resp) {\n  log("called with " + JSON.stringify(req.params));\n  resp.success("hello");\n}\n`;

export function Services({ systemKey: sk, name }: { systemKey: string; name?: string }) {
  const sys = useSystemName(sk);
  useSystemTrail(sk, sys, ["Services", href("s", sk, "services")], ...(name ? [[name, href("s", sk, "services", name)] as [string, string]] : []));
  return <>
    <h1>{sys}</h1>
    <Tabs systemKey={sk} on="Services" />
    {name ? <ServiceDetail systemKey={sk} name={name} /> : <ServiceList systemKey={sk} />}
  </>;
}

function ServiceList({ systemKey: sk }: { systemKey: string }) {
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<unknown>();
  const owned = usePlatformOwned("service");
  const remove = async (n: string) => {
    if (!confirm(`Delete the service ${n}?`)) return;
    try { await api("DELETE", `/admin/code/v/1/${enc(sk)}/${enc(n)}`); setVersion((v) => v + 1); setError(undefined); } catch (e) { setError(e); }
  };
  return <>
    <h2>Code services</h2>
    <ErrorBox error={error} />
    <ListView<string> id="services-table" label="Services" reloadKey={version} initialSort={{ field: "name", desc: false }}
      load={async (q) => pageOf((await api<{ code: string[] }>("GET", `/admin/code/v/1/${enc(sk)}`)).code, q, (n) => n, (n) => n)}
      rowKey={(n) => n} rowAttrs={(n) => ({ "data-service": n })}
      columns={[
        { label: "Name", sort: "name", cell: (n) => <a href={href("s", sk, "services", n)}>{n}</a> },
        { label: "Actions", cell: (n) => (owned(n) ? <OwnedCell reason={owned(n)} />
          : <button type="button" class="danger" aria-label={`Delete service ${n}`} onClick={() => void remove(n)}>Delete</button>) },
      ]} />
    <h2>New service</h2>
    <Form id="new-service" submit="Create service" fields={[
      { name: "name", label: "Name", required: true, check: (v) => (/^[A-Za-z_$][\w$]*$/.test(v.trim()) ? "" : "a JavaScript name: letters, digits, _ and $") },
      { name: "params", label: "Parameters (comma-separated)" },
    ]} onSubmit={async (v) => {
      const n = v.name!.trim();
      await api("POST", `/admin/code/v/1/${enc(sk)}/${enc(n)}`, { code: STARTER(n), parameters: v.params!.split(",").map((p) => p.trim()).filter(Boolean), logging_enabled: true });
      go("s", sk, "services", n);
    }} />
  </>;
}

function ServiceDetail({ systemKey: sk, name }: { systemKey: string; name: string }) {
  const svc = useLoad(() => api<Service>("GET", `/admin/code/v/1/${enc(sk)}/${enc(name)}`), [sk, name]);
  const logs = useLoad(() => api<Log[]>("GET", `/codeadmin/v/2/logs/${enc(sk)}/${enc(name)}`), [sk, name]);
  const [code, setCode] = useState<string>();
  const [saved, setSaved] = useState<string>();
  const [problem, setProblem] = useState<{ text: string; line?: number; column?: number }>();
  const [goTo, setGoTo] = useState<{ line: number; column: number }>();
  const [params, setParams] = useState("{}");
  const [result, setResult] = useState<{ ok: boolean; text: string }>();
  const [busy, setBusy] = useState(false);
  // on an edge, a service the platform sent is shown, run and logged here, and changed there
  const owned = usePlatformOwned("service")(name);
  const text = code ?? svc.data?.code ?? "";
  const save = async () => {
    setBusy(true);
    try {
      await api("PUT", `/admin/code/v/1/${enc(sk)}/${enc(name)}`, { code: text });
      setProblem(undefined);
      setSaved(new Date().toLocaleTimeString());
    } catch (e) {
      // a compile error names its line and column (the envelope's lowLevelError)
      const low = e instanceof CallError ? (e.envelope?.lowLevelError as { line?: number; column?: number } | undefined) : undefined;
      setProblem({ text: e instanceof Error ? e.message : String(e), line: low?.line ?? undefined, column: low?.column ?? undefined });
      if (low?.line) setGoTo({ line: low.line, column: low.column ?? 1 });
    } finally { setBusy(false); }
  };
  const run = async () => {
    setBusy(true);
    try {
      let body: unknown;
      try { body = JSON.parse(params || "{}"); } catch { throw new Error("the parameters are not JSON (an object like {\"who\": \"me\"})"); }
      const r = await api<{ results: unknown; success: boolean }>("POST", `/api/v/1/code/${enc(sk)}/${enc(name)}`, body);
      setResult({ ok: r.success !== false, text: typeof r.results === "string" ? r.results : JSON.stringify(r.results, null, 2) });
    } catch (e) { setResult({ ok: false, text: e instanceof Error ? e.message : String(e) }); }
    finally { setBusy(false); await logs.reload(); }
  };
  return <>
    <h2>Service {name}</h2>
    <OwnedNote reason={owned} />
    <ErrorBox error={svc.error} />
    {svc.data ? <>
      <p class="muted">Parameters: {svc.data.params.length ? svc.data.params.join(", ") : "none"} · version {svc.data.current_version} · logging {svc.data.logging_enabled ? "on" : "off"}</p>
      {owned ? <pre class="code" id="service-code" tabIndex={0} aria-label={`Code of ${name}`}>{text}</pre> : <>
        <CodeEditor id="service-code" label={`Code of ${name}`} value={text} onChange={setCode} goTo={goTo} />
        <div class="row">
          <button type="button" class="primary" id="save-service" disabled={busy} onClick={() => void save()}>Save</button>
          {saved && !problem ? <span role="status" id="service-saved">saved at {saved}</span> : null}
        </div>
      </>}
      {problem ? <p class="error" role="alert" id="service-problem">{problem.text}
        {problem.line ? <> <button type="button" onClick={() => setGoTo({ line: problem.line!, column: problem.column ?? 1 })}>Go to line {problem.line}</button></> : null}</p> : null}
      <h3>Run</h3>
      <div class="field">
        <label for="run-params">Parameters (JSON)</label>
        <textarea id="run-params" rows={3} value={params} onInput={(e) => setParams(e.currentTarget.value)} />
      </div>
      <button type="button" id="run-service" disabled={busy} onClick={() => void run()}>Run</button>
      {result ? <div class={`card result ${result.ok ? "ok" : "bad"}`} id="run-result" role="status"><strong>{result.ok ? "Result" : "Failed"}</strong><pre>{result.text}</pre></div> : null}
      <h3>Logs</h3>
      <ErrorBox error={logs.error} />
      <DataTable<Log> id="logs-table" caption="Logs of runs" rows={logs.data ?? []} rowKey={(l) => l.id}
        columns={[
          { label: "Started", cell: (l) => new Date(l.service_execution_time).toLocaleString() },
          { label: "Took (ms)", cls: "num", cell: (l) => l.duration_ms },
          { label: "Outcome", cell: (l) => (l.success ? "ok" : "failed") },
          { label: "Log", cell: (l) => <pre class="payload">{l.log}</pre> },
        ]} />
    </> : null}
  </>;
}
