// A system's files: bucket sets (each with its boxes inbox, outbox and sandbox) and file stores.
// Lists create and delete them; one set or store browses its files (search, sort, pages), uploads
// a file from this computer, downloads one, and deletes one. A set's files travel as base64 in
// JSON, a store's as bytes.
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { api, enc } from "../api.ts";
import { base64Of, blobOfBase64, download, fetchBytes } from "../bytes.ts";
import { ErrorBox, Tabs } from "../components/bits.tsx";
import { Form } from "../components/form.tsx";
import { ListView, pageOf } from "../components/list.tsx";
import { href } from "../router.ts";
import { OwnedCell, usePlatformOwned } from "../components/owned.tsx";
import { useSystemName, useSystemTrail } from "../trail.ts";

interface BucketSet { name: string; platform_storage: string; edge_storage: string; created_at: string }
interface FileStore { name: string; storage_type: string; read_auth_method: string; write_auth_method: string }
interface SetFile { path_name: string; relative_name: string; bucket_name: string; size: number; last_modified: string }
interface StoreFile { full_path: string; size_bytes: number; updated_at: number; is_dir: boolean }

const BOXES = ["inbox", "outbox", "sandbox"];
const size = (n: number) => (n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KB` : `${(n / 1024 / 1024).toFixed(1)} MB`);
const baseName = (p: string) => p.split("/").pop() || p;

export function Files({ systemKey: sk, kind, name }: { systemKey: string; kind?: string; name?: string }) {
  const sys = useSystemName(sk);
  const detail = name && (kind === "set" || kind === "store");
  useSystemTrail(sk, sys, ["Files", href("s", sk, "files")], ...(detail ? [[`${kind === "set" ? "bucket set" : "file store"} ${name}`, href("s", sk, "files", kind!, name!)] as [string, string]] : []));
  return <>
    <h1>{sys}</h1>
    <Tabs systemKey={sk} on="Files" />
    {!detail ? <FileAreas systemKey={sk} /> : kind === "set" ? <SetFiles systemKey={sk} name={name!} /> : <StoreFiles systemKey={sk} name={name!} />}
  </>;
}

function FileAreas({ systemKey: sk }: { systemKey: string }) {
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<unknown>();
  // on an edge, a bucket set the platform sent is its own (the files in it are the edge's)
  const owned = usePlatformOwned("bucketset");
  const act = async (confirmText: string, fn: () => Promise<unknown>) => {
    if (!confirm(confirmText)) return;
    try { await fn(); setVersion((v) => v + 1); setError(undefined); } catch (e) { setError(e); }
  };
  return <>
    <h2>Bucket sets</h2>
    <ErrorBox error={error} />
    <ListView<BucketSet> id="bucket-sets" label="Bucket sets" reloadKey={version} initialSort={{ field: "name", desc: false }}
      load={async (q) => pageOf(await api<BucketSet[]>("GET", `/api/v/4/bucket_sets/${enc(sk)}`), q, (b) => b.name, (b, f) => String(b[f as "name"] ?? ""))}
      rowKey={(b) => b.name} rowAttrs={(b) => ({ "data-set": b.name })}
      columns={[
        { label: "Name", sort: "name", cell: (b) => <a href={href("s", sk, "files", "set", b.name)}>{b.name}</a> },
        { label: "Storage", cell: (b) => `platform ${b.platform_storage} · edge ${b.edge_storage}` },
        { label: "Actions", cell: (b) => (owned(b.name) ? <OwnedCell reason={owned(b.name)} /> : <button type="button" class="danger" aria-label={`Delete bucket set ${b.name}`}
          onClick={() => void act(`Delete the bucket set ${b.name} and its files?`, () => api("DELETE", `/api/v/4/bucket_sets/${enc(sk)}/${enc(b.name)}`))}>Delete</button>) },
      ]} />
    <Form id="new-set" cls="card form inline-form" submit="Create bucket set" fields={[{ name: "name", label: "Bucket set name", required: true }]}
      onSubmit={async (v) => { await api("POST", `/api/v/4/bucket_sets/${enc(sk)}`, { name: v.name!.trim() }); setVersion((n) => n + 1); }} />
    <h2>File stores</h2>
    <ListView<FileStore> id="file-stores" label="File stores" reloadKey={version} initialSort={{ field: "name", desc: false }}
      load={async (q) => pageOf(await api<FileStore[]>("GET", `/api/v/1/filestore/${enc(sk)}`), q, (s) => s.name, (s, f) => String(s[f as "name"] ?? ""))}
      rowKey={(s) => s.name} rowAttrs={(s) => ({ "data-store": s.name })}
      columns={[
        { label: "Name", sort: "name", cell: (s) => <a href={href("s", sk, "files", "store", s.name)}>{s.name}</a> },
        { label: "Storage", cell: (s) => s.storage_type },
        { label: "Read / write by", cell: (s) => `${s.read_auth_method} / ${s.write_auth_method}` },
        { label: "Actions", cell: (s) => <button type="button" class="danger" aria-label={`Delete file store ${s.name}`}
          onClick={() => void act(`Delete the file store ${s.name}? Files on local storage go with it.`, () => api("DELETE", `/api/v/1/filestore/${enc(sk)}?name=${enc(s.name)}`))}>Delete</button> },
      ]} />
    <Form id="new-store" cls="card form inline-form" submit="Create file store" fields={[
      { name: "name", label: "File store name", required: true },
      { name: "read", label: "Read by", type: "select", options: ["clearblade_auth", "http_basic_auth", "payload_auth", "no_auth"] },
      { name: "write", label: "Write by", type: "select", options: ["clearblade_auth", "http_basic_auth", "payload_auth", "no_auth"] },
    ]} onSubmit={async (v) => {
      await api("POST", `/api/v/1/filestore/${enc(sk)}`, { name: v.name!.trim(), storage_type: "local", read_auth_method: v.read, write_auth_method: v.write });
      setVersion((n) => n + 1);
    }} />
  </>;
}

/** Upload: a file from this computer, under a path (its own name unless one is typed). */
function Upload({ id, prefix, onUpload }: { id: string; prefix?: ComponentChildren; onUpload: (file: File, path: string) => Promise<void> }) {
  const [file, setFile] = useState<File>();
  const [path, setPath] = useState("");
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const send = async (e: Event) => {
    e.preventDefault();
    if (!file) { setError(new Error("choose a file to upload")); return; }
    setBusy(true);
    try { await onUpload(file, path.trim() || file.name); setError(undefined); setPath(""); } catch (err) { setError(err); } finally { setBusy(false); }
  };
  return <form id={id} class="card form inline-form" onSubmit={send} noValidate>
    {prefix}
    <div class="field"><label for={`${id}-file`}>File</label><input type="file" id={`${id}-file`} onChange={(e) => setFile(e.currentTarget.files?.[0])} /></div>
    <div class="field"><label for={`${id}-path`}>Path (empty: the file's name)</label><input id={`${id}-path`} value={path} onInput={(e) => setPath(e.currentTarget.value)} /></div>
    <ErrorBox error={error} />
    <button type="submit" class="primary" disabled={busy}>Upload</button>
  </form>;
}

function SetFiles({ systemKey: sk, name }: { systemKey: string; name: string }) {
  const base = `/api/v/4/bucket_sets/${enc(sk)}/${enc(name)}`;
  const [box, setBox] = useState("");
  const [upBox, setUpBox] = useState("sandbox");
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<unknown>();
  const get = async (f: SetFile) => {
    try { download(baseName(f.relative_name), blobOfBase64(await api<string>("GET", `${base}/file/read?box=${enc(f.bucket_name)}&path=${enc(f.relative_name)}`))); setError(undefined); } catch (e) { setError(e); }
  };
  const remove = async (f: SetFile) => {
    if (!confirm(`Delete ${f.path_name}?`)) return;
    try { await api("POST", `${base}/file/delete`, { box: f.bucket_name, path: f.relative_name }); setVersion((v) => v + 1); setError(undefined); } catch (e) { setError(e); }
  };
  return <>
    <h2>Bucket set {name}</h2>
    <ErrorBox error={error} />
    <ListView<SetFile> id="set-files" label="Files by path" reloadKey={`${version}/${box}`} initialSort={{ field: "path_name", desc: false }}
      filters={<label>Box <select id="set-files-box" value={box} onChange={(e) => setBox(e.currentTarget.value)}>
        <option value="">every box</option>{BOXES.map((b) => <option key={b} value={b}>{b}</option>)}</select></label>}
      load={async (q) => pageOf(Object.values(await api<Record<string, SetFile>>("GET", `${base}/files?box=${enc(box)}`)), q, (f) => f.path_name,
        (f, k) => (k === "size" ? f.size : String(f[k as "path_name"] ?? "")))}
      rowKey={(f) => f.path_name} rowAttrs={(f) => ({ "data-file": f.path_name })}
      columns={[
        { label: "Path", sort: "path_name", cell: (f) => <code>{f.path_name}</code> },
        { label: "Size", sort: "size", cls: "num", cell: (f) => size(f.size) },
        { label: "Modified", sort: "last_modified", cell: (f) => new Date(f.last_modified).toLocaleString() },
        { label: "Actions", cell: (f) => <div class="row">
          <button type="button" class="download" aria-label={`Download ${f.path_name}`} onClick={() => void get(f)}>Download</button>
          <button type="button" class="danger" aria-label={`Delete ${f.path_name}`} onClick={() => void remove(f)}>Delete</button>
        </div> },
      ]} />
    <h3>Upload</h3>
    <Upload id="set-upload" prefix={<div class="field"><label for="set-upload-box">Box</label>
      <select id="set-upload-box" value={upBox} onChange={(e) => setUpBox(e.currentTarget.value)}>{BOXES.map((b) => <option key={b} value={b}>{b}</option>)}</select></div>}
      onUpload={async (file, path) => { await api("POST", `${base}/file/create`, { box: upBox, path, contents: await base64Of(file) }); setVersion((v) => v + 1); }} />
  </>;
}

function StoreFiles({ systemKey: sk, name }: { systemKey: string; name: string }) {
  const base = `/api/v/1/filestore/${enc(sk)}/${enc(name)}`;
  const filePath = (p: string) => `${base}/file/${p.split("/").map(enc).join("/")}`;
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<unknown>();
  const get = async (f: StoreFile) => {
    try { download(baseName(f.full_path), await fetchBytes("GET", filePath(f.full_path))); setError(undefined); } catch (e) { setError(e); }
  };
  const remove = async (f: StoreFile) => {
    if (!confirm(`Delete ${f.full_path}?`)) return;
    try { await fetchBytes("DELETE", filePath(f.full_path)); setVersion((v) => v + 1); setError(undefined); } catch (e) { setError(e); }
  };
  return <>
    <h2>File store {name}</h2>
    <ErrorBox error={error} />
    <ListView<StoreFile> id="store-files" label="Files by path" reloadKey={version} initialSort={{ field: "full_path", desc: false }}
      load={async (q) => {
        // every file, all levels down, a listing page (100) at a time
        const all: StoreFile[] = [];
        let token = "";
        do {
          const r = await api<{ files: StoreFile[]; continuation_token: string }>("GET", `${base}/list?depth=-1&limit=1000${token ? `&continuation_token=${enc(token)}` : ""}`);
          all.push(...r.files.filter((f) => !f.is_dir));
          token = r.continuation_token;
        } while (token && all.length < 10_000);
        return pageOf(all, q, (f) => f.full_path, (f, k) => (k === "size_bytes" ? f.size_bytes : k === "updated_at" ? f.updated_at : f.full_path));
      }}
      rowKey={(f) => f.full_path} rowAttrs={(f) => ({ "data-file": f.full_path })}
      columns={[
        { label: "Path", sort: "full_path", cell: (f) => <code>{f.full_path}</code> },
        { label: "Size", sort: "size_bytes", cls: "num", cell: (f) => size(f.size_bytes) },
        { label: "Modified", sort: "updated_at", cell: (f) => new Date(f.updated_at * 1000).toLocaleString() },
        { label: "Actions", cell: (f) => <div class="row">
          <button type="button" class="download" aria-label={`Download ${f.full_path}`} onClick={() => void get(f)}>Download</button>
          <button type="button" class="danger" aria-label={`Delete ${f.full_path}`} onClick={() => void remove(f)}>Delete</button>
        </div> },
      ]} />
    <h3>Upload</h3>
    <Upload id="store-upload" onUpload={async (file, path) => { await fetchBytes("PUT", filePath(path), file); setVersion((v) => v + 1); }} />
  </>;
}
