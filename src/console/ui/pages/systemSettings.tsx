// A system's settings: what `PUT /admin/systemmanagement` changes (name, description, sign-in
// rules, token lifetimes), its secret regenerated, and deleting it once its name is typed.
import { useState } from "preact/hooks";
import { api, enc } from "../api.ts";
import { ErrorBox, KV, Tabs, useLoad } from "../components/bits.tsx";
import { Form } from "../components/form.tsx";
import { go, href } from "../router.ts";
import { useSystemTrail } from "../trail.ts";

interface SystemSettings {
  systemKey: string; systemSecret: string; name: string; description: string; token_ttl: number; token_ttl_user: number;
  token_ttl_device: number; auth_required: boolean; registration: boolean; created_at?: string;
}

/** A token lifetime: -1 (never expires) or a positive number of seconds, as the API takes it. */
const ttlProblem = (v: string) => (/^(-1|[1-9]\d*)$/.test(v.trim()) ? "" : "seconds (a whole number above 0), or -1 for never");
const TTLS = [["token_ttl", "Token lifetime (seconds, -1: never)"], ["token_ttl_user", "User token lifetime"], ["token_ttl_device", "Device token lifetime"]] as const;
const FLAGS = [["auth_required", "Sign-in required"], ["registration", "Users may register themselves"]] as const;

export function SystemSettingsPage({ systemKey: sk }: { systemKey: string }) {
  const sys = useLoad(() => api<SystemSettings>("GET", `/admin/systemmanagement?id=${enc(sk)}`), [sk]);
  const name = sys.data?.name ?? sk;
  useSystemTrail(sk, name, ["Settings", href("s", sk, "settings")]);
  const [saved, setSaved] = useState<string>();
  const [secret, setSecret] = useState<string>();
  const [typed, setTyped] = useState("");
  const [error, setError] = useState<unknown>();
  const s = sys.data;
  const regenerate = async () => {
    if (!confirm("Give the system a new secret? Clients signing in with the old one are refused from now on.")) return;
    try { setSecret((await api<SystemSettings>("PUT", "/admin/regensystemsecret", { id: sk })).systemSecret); setError(undefined); } catch (e) { setError(e); }
  };
  const remove = async (e: Event) => {
    e.preventDefault();
    try { await api("DELETE", `/admin/systemmanagement?id=${enc(sk)}`); go(); } catch (err) { setError(err); }
  };
  return <>
    <h1>{name}</h1>
    <Tabs systemKey={sk} on="Settings" />
    <ErrorBox error={sys.error} />
    {s ? <>
      <div class="card" id="system-head">
        <KV items={[["System key", <code>{s.systemKey}</code>], ["Created", s.created_at ?? "–"]]} />
        <div class="row actions">
          <button type="button" id="regen-secret" onClick={() => void regenerate()}>New system secret</button>
        </div>
        {secret ? <p role="status" id="new-secret">New secret: <code>{secret}</code></p> : null}
      </div>
      <h2>Settings</h2>
      <Form id="edit-system" submit="Save settings" key={JSON.stringify(s)} fields={[
        { name: "name", label: "Name", required: true, value: s.name },
        { name: "description", label: "Description", type: "textarea", value: s.description },
        ...TTLS.map(([f, label]) => ({ name: f, label, type: "number" as const, value: String(s[f]), check: ttlProblem })),
        ...FLAGS.map(([f, label]) => ({ name: f, label, type: "checkbox" as const, value: String(s[f]) })),
      ]} onSubmit={async (v) => {
        const body: Record<string, unknown> = { id: sk, name: v.name!.trim(), description: v.description };
        for (const [f] of TTLS) if (Number(v[f]) !== s[f]) body[f] = Number(v[f]);
        for (const [f] of FLAGS) body[f] = v[f] === "true";
        await api("PUT", "/admin/systemmanagement", body);
        // said once the form shows what was saved (a new form replaces this one)
        await sys.reload();
        setSaved(new Date().toLocaleTimeString());
      }} />
      {saved ? <p role="status" id="system-saved">saved at {saved}</p> : null}
      <h2>Delete</h2>
      <form class="card form" id="delete-system" onSubmit={remove}>
        <p>Deleting the system deletes everything in it: collections, code, users, devices, edges.</p>
        <div class="field">
          <label for="delete-system-name">Type the system's name, {s.name}, to delete it</label>
          <input id="delete-system-name" autocomplete="off" value={typed} onInput={(e) => setTyped(e.currentTarget.value)} />
        </div>
        <button type="submit" class="danger" disabled={typed !== s.name}>Delete system</button>
      </form>
      <ErrorBox error={error} />
    </> : null}
  </>;
}
