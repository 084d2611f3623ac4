// A system's code libraries: the list (create, delete), and one library: its code in the editor
// (saved through the API, which refuses code that does not compile and says where), its
// description, and its versions (each one's code shown, and restored as a new version).
import { useState } from "preact/hooks";
import { CallError, api, enc } from "../api.ts";
import { ErrorBox, Tabs, useLoad } from "../components/bits.tsx";
import { CodeEditor } from "../components/code.tsx";
import { Form } from "../components/form.tsx";
import { ListView, pageOf } from "../components/list.tsx";
import { DataTable } from "../components/table.tsx";
import { go, href } from "../router.ts";
import { OwnedCell, OwnedNote, usePlatformOwned } from "../components/owned.tsx";
import { useSystemName, useSystemTrail } from "../trail.ts";

interface Library { name: string; description: string; version: number; code: string; dependencies: string }
interface Version { version: number; code: string; description: string; created_at: string }

const STARTER = (name: string) => `// ${name}: functions the services that depend on it can call\nfunction ${name.replace(/\W/g, "_")}Hello(who) {\n  return "hello " + who;\n}\n`;

export function Libraries({ systemKey: sk, name }: { systemKey: string; name?: string }) {
  const sys = useSystemName(sk);
  useSystemTrail(sk, sys, ["Libraries", href("s", sk, "libraries")], ...(name ? [[name, href("s", sk, "libraries", name)] as [string, string]] : []));
  return <>
    <h1>{sys}</h1>
    <Tabs systemKey={sk} on="Libraries" />
    {name ? <LibraryDetail systemKey={sk} name={name} /> : <LibraryList systemKey={sk} />}
  </>;
}

function LibraryList({ systemKey: sk }: { systemKey: string }) {
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<unknown>();
  const owned = usePlatformOwned("library");
  const remove = async (n: string) => {
    if (!confirm(`Delete the library ${n}?`)) return;
    try { await api("DELETE", `/codeadmin/v/2/library/${enc(sk)}/${enc(n)}`); setVersion((v) => v + 1); setError(undefined); } catch (e) { setError(e); }
  };
  return <>
    <h2>Code libraries</h2>
    <ErrorBox error={error} />
    <ListView<Library> id="libraries-table" label="Libraries" reloadKey={version} initialSort={{ field: "name", desc: false }}
      load={async (q) => pageOf(await api<Library[]>("GET", `/codeadmin/v/2/library/${enc(sk)}`), q, (l) => `${l.name} ${l.description}`, (l, f) => (f === "version" ? l.version : String(l[f as "name"] ?? "")))}
      rowKey={(l) => l.name} rowAttrs={(l) => ({ "data-library": l.name })}
      columns={[
        { label: "Name", sort: "name", cell: (l) => <a href={href("s", sk, "libraries", l.name)}>{l.name}</a> },
        { label: "Version", sort: "version", cls: "num", cell: (l) => l.version },
        { label: "Description", cell: (l) => l.description },
        { label: "Actions", cell: (l) => (owned(l.name) ? <OwnedCell reason={owned(l.name)} />
          : <button type="button" class="danger" aria-label={`Delete library ${l.name}`} onClick={() => void remove(l.name)}>Delete</button>) },
      ]} />
    <h2>New library</h2>
    <Form id="new-library" submit="Create library" fields={[
      { name: "name", label: "Name", required: true, check: (v) => (/^[A-Za-z_$][\w$]*$/.test(v.trim()) ? "" : "a JavaScript name: letters, digits, _ and $") },
      { name: "description", label: "Description" },
    ]} onSubmit={async (v) => {
      const n = v.name!.trim();
      await api("POST", `/codeadmin/v/2/library/${enc(sk)}/${enc(n)}`, { code: STARTER(n), description: v.description });
      go("s", sk, "libraries", n);
    }} />
  </>;
}

function LibraryDetail({ systemKey: sk, name }: { systemKey: string; name: string }) {
  const path = `/codeadmin/v/2/library/${enc(sk)}/${enc(name)}`;
  const lib = useLoad(() => api<Library>("GET", path), [sk, name]);
  const versions = useLoad(() => api<Version[]>("GET", `/codeadmin/v/2/history/library/${enc(sk)}/${enc(name)}`), [sk, name]);
  const [code, setCode] = useState<string>();
  const [problem, setProblem] = useState<{ text: string; line?: number }>();
  const [goTo, setGoTo] = useState<{ line: number; column: number }>();
  const [saved, setSaved] = useState<string>();
  const [shown, setShown] = useState<Version>();
  const [busy, setBusy] = useState(false);
  // a new editor (a new key) when a restored version replaces the code
  const [generation, setGeneration] = useState(0);
  // on an edge, a library the platform sent is read here and changed there
  const owned = usePlatformOwned("library")(name);
  const text = code ?? lib.data?.code ?? "";
  const save = async (body: { code: string; description?: string }, restored = false) => {
    setBusy(true);
    try {
      await api("PUT", path, body);
      setProblem(undefined);
      setSaved(new Date().toLocaleTimeString());
      await Promise.all([lib.reload(), versions.reload()]);
      // a restored version replaces what the editor holds: a new editor from the saved code
      if (restored) { setCode(undefined); setGeneration((g) => g + 1); }
    } catch (e) {
      const low = e instanceof CallError ? (e.envelope?.lowLevelError as { line?: number; column?: number } | undefined) : undefined;
      setProblem({ text: e instanceof Error ? e.message : String(e), line: low?.line ?? undefined });
      if (low?.line) setGoTo({ line: low.line, column: low.column ?? 1 });
    } finally { setBusy(false); }
  };
  const l = lib.data;
  return <>
    <h2>Library {name}</h2>
    <OwnedNote reason={owned} />
    <ErrorBox error={lib.error} />
    {l ? <>
      <p class="muted" id="library-version">version {l.version}{l.dependencies ? ` · depends on ${l.dependencies}` : ""}</p>
      {owned ? <pre class="code" id="library-code" tabIndex={0} aria-label={`Code of ${name}`}>{text}</pre> : <>
      <CodeEditor key={generation} id="library-code" label={`Code of ${name}`} value={text} onChange={setCode} goTo={goTo} />
      <div class="row">
        <button type="button" class="primary" id="save-library" disabled={busy} onClick={() => void save({ code: text })}>Save</button>
        {saved && !problem ? <span role="status" id="library-saved">saved at {saved}</span> : null}
      </div>
      {problem ? <p class="error" role="alert" id="library-problem">{problem.text}</p> : null}
      </>}
      {owned ? null : <Form key={l.description} id="library-description" cls="card form inline-form" submit="Save description" fields={[{ name: "description", label: "Description", value: l.description }]}
        onSubmit={async (v) => { await api("PUT", path, { description: v.description }); await Promise.all([lib.reload(), versions.reload()]); }} />}
      <h3>Versions</h3>
      <ErrorBox error={versions.error} />
      <DataTable<Version> id="versions-table" caption="Versions" rows={(versions.data ?? []).slice().reverse()} rowKey={(v) => String(v.version)} rowAttrs={(v) => ({ "data-version": String(v.version) })}
        columns={[
          { label: "Version", cls: "num", cell: (v) => v.version },
          { label: "Saved", cell: (v) => new Date(v.created_at).toLocaleString() },
          { label: "Actions", cell: (v) => <div class="row">
            <button type="button" aria-label={`Show version ${v.version}`} onClick={() => setShown(v)}>Show</button>
            {owned ? null : <button type="button" aria-label={`Restore version ${v.version}`} disabled={busy || v.version === l.version} onClick={() => void save({ code: v.code }, true)}>Restore</button>}
          </div> },
        ]} />
      {shown ? <div class="card" id="version-shown" role="region" aria-label={`Version ${shown.version}`}>
        <strong>Version {shown.version}</strong> <button type="button" onClick={() => setShown(undefined)}>Close</button>
        <pre class="payload">{shown.code}</pre>
      </div> : null}
    </> : null}
  </>;
}
