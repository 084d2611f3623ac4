// A system's adapters: the list (search, sort; the API answers it whole), create, delete; one
// adapter: its settings and commands (edited), and its files (each kept with every version):
// add one (typed, or a file from this computer), read and replace its content, delete it.
import { useState } from "preact/hooks";
import { api, enc } from "../api.ts";
import { ErrorBox, Tabs, useLoad } from "../components/bits.tsx";
import { type Field, Form } from "../components/form.tsx";
import { ListView, pageOf } from "../components/list.tsx";
import { DataTable } from "../components/table.tsx";
import { go, href } from "../router.ts";
import { OwnedCell, OwnedDefinition, OwnedNote, usePlatformOwned } from "../components/owned.tsx";
import { useSystemName, useSystemTrail } from "../trail.ts";

interface Adapter { name: string; description: string; protocol: string; architecture: string; os: string; version: number; updated_at: string; [command: string]: unknown }
interface AdapterFile { name: string; path_name: string; permissions: string; version: number; size: number; created_at: string; current?: boolean; file?: string }

const NAME_RE = /^[A-Za-z0-9_][\w.-]*$/;
const nameCheck = (v: string) => (NAME_RE.test(v.trim()) ? "" : "letters, digits, _, - and . (not starting with - or .)");
const TEXT: [string, string][] = [
  ["description", "Description"], ["protocol", "Protocol"], ["architecture", "Architecture"], ["os", "OS"],
  ["deploy_command", "Deploy command"], ["start_command", "Start command"], ["stop_command", "Stop command"],
  ["status_command", "Status command"], ["undeploy_command", "Undeploy command"], ["logs_command", "Logs command"],
];

/** Base64 of a text's UTF-8 bytes, and back (the API carries file content as base64). */
const toBase64 = (bytes: Uint8Array) => { let s = ""; for (const b of bytes) s += String.fromCharCode(b); return btoa(s); };
const textToBase64 = (t: string) => toBase64(new TextEncoder().encode(t));
function base64ToText(b64: string): string | undefined {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  try { return new TextDecoder("utf-8", { fatal: true }).decode(bytes); } catch { return undefined; }
}

export function Adapters({ systemKey: sk, name }: { systemKey: string; name?: string }) {
  const sys = useSystemName(sk);
  useSystemTrail(sk, sys, ["Adapters", href("s", sk, "adapters")], ...(name ? [[name, href("s", sk, "adapters", name)] as [string, string]] : []));
  return <>
    <h1>{sys}</h1>
    <Tabs systemKey={sk} on="Adapters" />
    {name ? <AdapterDetail systemKey={sk} name={name} /> : <AdapterList systemKey={sk} />}
  </>;
}

function AdapterList({ systemKey: sk }: { systemKey: string }) {
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<unknown>();
  const owned = usePlatformOwned("adapter");
  const remove = async (a: Adapter) => {
    if (!confirm(`Delete the adapter ${a.name} and its files?`)) return;
    try { await api("DELETE", `/api/v/4/${enc(sk)}/adapters/${enc(a.name)}`); setVersion((v) => v + 1); setError(undefined); } catch (e) { setError(e); }
  };
  return <>
    <h2>Adapters</h2>
    <ErrorBox error={error} />
    <ListView<Adapter> id="adapters-table" label="Adapters" reloadKey={version} initialSort={{ field: "name", desc: false }}
      load={async (q) => pageOf(await api<Adapter[]>("GET", `/api/v/4/${enc(sk)}/adapters`), q,
        (a) => `${a.name} ${a.description} ${a.protocol}`, (a, f) => (f === "version" ? a.version : String(a[f] ?? "")))}
      rowKey={(a) => a.name} rowAttrs={(a) => ({ "data-adapter": a.name })}
      columns={[
        { label: "Name", sort: "name", cell: (a) => <a href={href("s", sk, "adapters", a.name)}>{a.name}</a> },
        { label: "Description", cell: (a) => a.description || "–" },
        { label: "Protocol", sort: "protocol", cell: (a) => a.protocol || "–" },
        { label: "Version", cls: "num", sort: "version", cell: (a) => a.version },
        { label: "Actions", cell: (a) => (owned(a.name) ? <OwnedCell reason={owned(a.name)} />
          : <button type="button" class="danger" aria-label={`Delete adapter ${a.name}`} onClick={() => void remove(a)}>Delete</button>) },
      ]} />
    <h2>New adapter</h2>
    <Form id="new-adapter" submit="Create adapter" fields={[
      { name: "name", label: "Name", required: true, check: nameCheck },
      { name: "description", label: "Description" },
      { name: "protocol", label: "Protocol" },
    ]} onSubmit={async (v) => {
      const n = v.name!.trim();
      await api("POST", `/api/v/4/${enc(sk)}/adapters`, { name: n, description: v.description, protocol: v.protocol });
      go("s", sk, "adapters", n);
    }} />
  </>;
}

function AdapterDetail({ systemKey: sk, name }: { systemKey: string; name: string }) {
  const base = `/api/v/4/${enc(sk)}/adapters/${enc(name)}`;
  const a = useLoad(() => api<Adapter>("GET", base), [sk, name]);
  const files = useLoad(() => api<AdapterFile[]>("GET", `${base}/files`), [sk, name]);
  const [saved, setSaved] = useState<string>();
  const [error, setError] = useState<unknown>();
  const [open, setOpen] = useState<AdapterFile & { text?: string }>();
  // on an edge, an adapter the platform sent (its settings and files) is read here, changed there
  const owned = usePlatformOwned("adapter")(name);
  const current = (files.data ?? []).filter((f) => f.current);
  const versions = (n: string) => (files.data ?? []).filter((f) => f.name === n).length;
  const show = async (f: AdapterFile) => {
    try {
      const got = await api<AdapterFile>("GET", `${base}/files/${enc(f.name)}`);
      setOpen({ ...got, text: base64ToText(got.file ?? "") });
      setError(undefined);
    } catch (e) { setError(e); }
  };
  const remove = async (f: AdapterFile) => {
    if (!confirm(`Delete the file ${f.name} (every version)?`)) return;
    try { await api("DELETE", `${base}/files/${enc(f.name)}`); if (open?.name === f.name) setOpen(undefined); await files.reload(); setError(undefined); } catch (e) { setError(e); }
  };
  return <>
    <h2>Adapter {name}</h2>
    <OwnedNote reason={owned} />
    <ErrorBox error={a.error} />
    {a.data ? <>
      <p class="muted">version {a.data.version} · changed {new Date(a.data.updated_at).toLocaleString()}</p>
      <h3>Settings and commands</h3>
      {owned ? <OwnedDefinition id="adapter-definition" label={`Adapter ${name}`} value={Object.fromEntries(TEXT.map(([k]) => [k, a.data![k] ?? ""]))} />
        : <Form id="edit-adapter" submit="Save adapter" key={String(a.data.version)}
          fields={TEXT.map(([k, label]): Field => ({ name: k, label, value: String(a.data![k] ?? "") }))}
          onSubmit={async (v) => { await api("PUT", base, v); setSaved(new Date().toLocaleTimeString()); await a.reload(); }} />}
      {saved ? <p role="status" id="adapter-saved">saved at {saved}</p> : null}
    </> : null}
    <h3>Files</h3>
    <ErrorBox error={files.error ?? error} />
    <DataTable<AdapterFile> id="adapter-files" caption="Files" rows={current} rowKey={(f) => f.name} rowAttrs={(f) => ({ "data-file": f.name })}
      columns={[
        { label: "Name", cell: (f) => f.name }, { label: "Path", cell: (f) => f.path_name },
        { label: "Mode", cell: (f) => f.permissions || "0644" }, { label: "Size", cls: "num", cell: (f) => f.size },
        { label: "Version", cls: "num", cell: (f) => `${f.version} (${versions(f.name)} kept)` },
        { label: "Actions", cell: (f) => <span class="row">
          <button type="button" aria-label={`Open file ${f.name}`} onClick={() => void show(f)}>Open</button>
          {owned ? null : <button type="button" class="danger" aria-label={`Delete file ${f.name}`} onClick={() => void remove(f)}>Delete</button>}
        </span> },
      ]} />
    {open && owned ? <div class="card" id="adapter-file-shown" role="region" aria-label={`File ${open.name}`}><strong>{open.name}</strong> <button type="button" onClick={() => setOpen(undefined)}>Close</button>
      <pre class="payload">{open.text ?? "(binary)"}</pre></div> : null}
    {open && !owned ? <FileEditor base={base} file={open} key={`${open.name}/${open.version}`} onSaved={async (f) => { await files.reload(); await show(f); }} onClose={() => setOpen(undefined)} /> : null}
    {owned ? null : <><h3>Add a file</h3>
      <NewFile base={base} onAdded={() => void files.reload()} /></>}
  </>;
}

/** A file's content: text is edited here and saved as a new version; other content is only described. */
function FileEditor({ base, file, onSaved, onClose }: { base: string; file: AdapterFile & { text?: string }; onSaved: (f: AdapterFile) => Promise<void>; onClose: () => void }) {
  const [text, setText] = useState(file.text ?? "");
  const [error, setError] = useState<unknown>();
  const save = async () => {
    try { await api("PUT", `${base}/files/${enc(file.name)}`, { file: textToBase64(text) }); setError(undefined); await onSaved(file); } catch (e) { setError(e); }
  };
  return <div class="card" id="adapter-file">
    <h4>{file.name}, version {file.version}</h4>
    {file.text === undefined ? <p class="muted">Binary content, {file.size} bytes: replace it by adding a file of the same name.</p> : <>
      <div class="field"><label for="adapter-file-text">Content of {file.name}</label>
        <textarea id="adapter-file-text" rows={8} value={text} onInput={(e) => setText(e.currentTarget.value)} /></div>
      <ErrorBox error={error} />
      <button type="button" class="primary" id="adapter-file-save" onClick={() => void save()}>Save as a new version</button>{" "}
    </>}
    <button type="button" onClick={onClose}>Close</button>
  </div>;
}

function NewFile({ base, onAdded }: { base: string; onAdded: () => void }) {
  const [picked, setPicked] = useState<{ name: string; b64: string }>();
  const fields: Field[] = [
    { name: "name", label: "File name", required: !picked, check: (v) => (!v.trim() && picked ? "" : nameCheck(v)) },
    { name: "path_name", label: "Path in the adapter's directory (empty: the name)" },
    { name: "permissions", label: "Mode (octal)", value: "0644", check: (v) => (/^0?[0-7]{3}$/.test(v.trim()) || !v.trim() ? "" : "octal, like 0755") },
    { name: "content", label: "Content (or pick a file below)", type: "textarea" },
  ];
  return <>
    <Form id="new-adapter-file" submit="Add file" fields={fields} onSubmit={async (v) => {
      const n = v.name!.trim() || picked?.name || "";
      await api("POST", `${base}/files`, {
        name: n, ...(v.path_name!.trim() ? { path_name: v.path_name!.trim() } : {}), permissions: v.permissions!.trim(),
        file: picked && !v.content ? picked.b64 : textToBase64(v.content ?? ""),
      });
      setPicked(undefined);
      onAdded();
    }} />
    <label class="row">A file from this computer <input type="file" id="new-adapter-file-pick" onChange={async (e) => {
      const f = e.currentTarget.files?.[0];
      setPicked(f ? { name: f.name, b64: toBase64(new Uint8Array(await f.arrayBuffer())) } : undefined);
    }} /></label>
    {picked ? <p class="muted" role="status">{picked.name} will be added when the content above is left empty.</p> : null}
  </>;
}
