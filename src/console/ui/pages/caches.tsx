// A system's shared caches (ClearBlade.Cache): the definitions (create, edit the TTL and
// description, delete), and one cache's values: browse (search by key, sort), set a key to a
// JSON value, delete a key. Values expire together when no write comes within the TTL.
import { useState } from "preact/hooks";
import { api, enc } from "../api.ts";
import { ErrorBox, Tabs, useLoad } from "../components/bits.tsx";
import { Form } from "../components/form.tsx";
import { ListView, pageOf } from "../components/list.tsx";
import { go, href } from "../router.ts";
import { OwnedCell, OwnedNote, usePlatformOwned } from "../components/owned.tsx";
import { useSystemName, useSystemTrail } from "../trail.ts";

interface Cache { id: string; name: string; ttl: number; description: string }
interface Pair { key: string; value: unknown }

const ttlCheck = (v: string) => (/^\d+$/.test(v.trim()) && +v >= 30 && +v <= 3600 ? "" : "a whole number of seconds from 30 to 3600");
const jsonOf = (text: string): unknown => {
  try { return JSON.parse(text); } catch { throw new Error("the value is not JSON (a string goes in quotes: \"on\")"); }
};

export function Caches({ systemKey: sk, name }: { systemKey: string; name?: string }) {
  const sys = useSystemName(sk);
  useSystemTrail(sk, sys, ["Caches", href("s", sk, "caches")], ...(name ? [[name, href("s", sk, "caches", name)] as [string, string]] : []));
  return <>
    <h1>{sys}</h1>
    <Tabs systemKey={sk} on="Caches" />
    {name ? <CacheDetail systemKey={sk} name={name} /> : <CacheList systemKey={sk} />}
  </>;
}

function CacheList({ systemKey: sk }: { systemKey: string }) {
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<unknown>();
  const owned = usePlatformOwned("servicecache");
  const remove = async (n: string) => {
    if (!confirm(`Delete the cache ${n} and its values?`)) return;
    try { await api("DELETE", `/admin/v/4/service_caches/${enc(sk)}/${enc(n)}`); setVersion((v) => v + 1); setError(undefined); } catch (e) { setError(e); }
  };
  return <>
    <h2>Shared caches</h2>
    <ErrorBox error={error} />
    <ListView<Cache> id="caches-table" label="Caches" reloadKey={version} initialSort={{ field: "name", desc: false }}
      load={async (q) => pageOf(await api<Cache[]>("GET", `/admin/v/4/service_caches/${enc(sk)}`), q, (c) => `${c.name} ${c.description}`, (c, f) => (f === "ttl" ? c.ttl : String(c[f as "name"] ?? "")))}
      rowKey={(c) => c.id} rowAttrs={(c) => ({ "data-cache": c.name })}
      columns={[
        { label: "Name", sort: "name", cell: (c) => <a href={href("s", sk, "caches", c.name)}>{c.name}</a> },
        { label: "TTL (s)", sort: "ttl", cls: "num", cell: (c) => c.ttl },
        { label: "Description", cell: (c) => c.description },
        { label: "Actions", cell: (c) => (owned(c.name) ? <OwnedCell reason={owned(c.name)} />
          : <button type="button" class="danger" aria-label={`Delete cache ${c.name}`} onClick={() => void remove(c.name)}>Delete</button>) },
      ]} />
    <h2>New cache</h2>
    <Form id="new-cache" submit="Create cache" fields={[
      { name: "name", label: "Name", required: true },
      { name: "ttl", label: "TTL (seconds, 30 to 3600)", type: "number", required: true, value: "300", check: ttlCheck },
      { name: "description", label: "Description" },
    ]} onSubmit={async (v) => {
      const n = v.name!.trim();
      await api("POST", `/admin/v/4/service_caches/${enc(sk)}/${enc(n)}`, { ttl: Number(v.ttl), description: v.description });
      go("s", sk, "caches", n);
    }} />
  </>;
}

function CacheDetail({ systemKey: sk, name }: { systemKey: string; name: string }) {
  const path = `/admin/v/4/service_caches/${enc(sk)}/${enc(name)}`;
  const def = useLoad(() => api<Cache>("GET", path), [sk, name]);
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<unknown>();
  const remove = async (key: string) => {
    try { await api("DELETE", `${path}/values?key=${enc(key)}`); setVersion((v) => v + 1); setError(undefined); } catch (e) { setError(e); }
  };
  // on an edge, the definition of a cache the platform sent is its own; the values are this node's
  const owned = usePlatformOwned("servicecache")(name);
  return <>
    <h2>Cache {name}</h2>
    <OwnedNote reason={owned} />
    <ErrorBox error={def.error ?? error} />
    {def.data && !owned ? <Form key={`${def.data.ttl}/${def.data.description}`} id="edit-cache" cls="card form inline-form" submit="Save" fields={[
      { name: "ttl", label: "TTL (seconds)", type: "number", required: true, value: String(def.data.ttl), check: ttlCheck },
      { name: "description", label: "Description", value: def.data.description },
    ]} onSubmit={async (v) => { await api("PUT", path, { ttl: Number(v.ttl), description: v.description }); await def.reload(); }} /> : null}
    <h3>Values</h3>
    <p class="muted">Every value expires when no write comes within the TTL; a write restarts it.</p>
    <ListView<Pair> id="values-table" label="Values" reloadKey={version} initialSort={{ field: "key", desc: false }}
      load={async (q) => {
        const all = await api<Record<string, unknown>>("GET", `${path}/values`);
        return pageOf(Object.entries(all).map(([key, value]) => ({ key, value })), q, (p) => p.key, (p) => p.key);
      }}
      rowKey={(p) => p.key} rowAttrs={(p) => ({ "data-key": p.key })}
      columns={[
        { label: "Key", sort: "key", cell: (p) => <code>{p.key}</code> },
        { label: "Value (JSON)", cell: (p) => <pre class="payload">{JSON.stringify(p.value)}</pre> },
        { label: "Actions", cell: (p) => <button type="button" class="danger" aria-label={`Delete key ${p.key}`} onClick={() => void remove(p.key)}>Delete</button> },
      ]} />
    <h3>Set a value</h3>
    <Form id="set-value" submit="Set" fields={[
      { name: "key", label: "Key", required: true },
      { name: "value", label: "Value (JSON)", type: "textarea", required: true, placeholder: "{\"on\": true}" },
    ]} onSubmit={async (v) => { await api("PUT", `${path}/values`, { key: v.key, value: jsonOf(v.value!) }); setVersion((n) => n + 1); }} />
  </>;
}
