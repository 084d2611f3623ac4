// A system's webhooks: the list (search, sort; the API answers it whole) with each one's invoke
// URL, create, edit and delete; one webhook can be tried from its page with a method and a body,
// signed with the developer's token the way its authentication takes one.
import { useState } from "preact/hooks";
import { api, enc, session } from "../api.ts";
import { ErrorBox, KV, Tabs, useLoad } from "../components/bits.tsx";
import { type Field, Form } from "../components/form.tsx";
import { ListView, pageOf } from "../components/list.tsx";
import { go, href } from "../router.ts";
import { OwnedCell, OwnedNote, usePlatformOwned } from "../components/owned.tsx";
import { useSystemName, useSystemTrail } from "../trail.ts";

interface Webhook { id: string; name: string; description: string; auth_method: string; service_name: string; path: string }

const NAME_RE = /^[\w.-]+$/;
const AUTH_METHODS = ["platform_auth", "no_auth", "payload_auth", "http_basic_auth"];
const METHODS = ["POST", "GET", "PUT", "PATCH", "DELETE"];
/** Where a webhook is invoked (any of the five methods; `path` patterns follow the name). */
const invokeUrl = (sk: string, name: string) => `${location.origin}/api/v/4/webhook/execute/${enc(sk)}/${enc(name)}`;

export function Webhooks({ systemKey: sk, name }: { systemKey: string; name?: string }) {
  const sys = useSystemName(sk);
  useSystemTrail(sk, sys, ["Webhooks", href("s", sk, "webhooks")], ...(name ? [[name, href("s", sk, "webhooks", name)] as [string, string]] : []));
  return <>
    <h1>{sys}</h1>
    <Tabs systemKey={sk} on="Webhooks" />
    {name ? <WebhookDetail systemKey={sk} name={name} /> : <WebhookList systemKey={sk} />}
  </>;
}

/** The fields of a webhook's form: a new one's name too, and the system's services to pick from. */
const fieldsOf = (services: string[], w?: Webhook): Field[] => [
  ...(w ? [] : [{ name: "name", label: "Name", required: true, check: (v: string) => (NAME_RE.test(v.trim()) ? "" : "letters, digits, _, - and .") }]),
  { name: "description", label: "Description", value: w?.description ?? "" },
  { name: "service_name", label: "Service it runs", type: "select", options: services, value: w?.service_name ?? services[0] ?? "" },
  { name: "auth_method", label: "Authentication", type: "select", options: AUTH_METHODS, value: w?.auth_method ?? "platform_auth" },
  { name: "path", label: "Path after the name (e.g. /orders/:id; empty: none)", value: w?.path ?? "" },
];

function WebhookList({ systemKey: sk }: { systemKey: string }) {
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<unknown>();
  const services = useLoad(() => api<{ code: string[] }>("GET", `/admin/code/v/1/${enc(sk)}`).then((r) => r.code), [sk]);
  const owned = usePlatformOwned("webhook");
  const remove = async (w: Webhook) => {
    if (!confirm(`Delete the webhook ${w.name}? Its URL stops answering.`)) return;
    try { await api("DELETE", `/admin/v/4/webhook/${enc(sk)}/${enc(w.name)}`); setVersion((v) => v + 1); setError(undefined); } catch (e) { setError(e); }
  };
  return <>
    <h2>Webhooks</h2>
    <ErrorBox error={error} />
    <ListView<Webhook> id="webhooks-table" label="Webhooks" reloadKey={version} initialSort={{ field: "name", desc: false }}
      load={async (q) => pageOf(await api<Webhook[]>("GET", `/admin/v/4/webhook/${enc(sk)}`), q,
        (w) => `${w.name} ${w.description} ${w.service_name}`, (w, f) => String(w[f as keyof Webhook] ?? ""))}
      rowKey={(w) => w.name} rowAttrs={(w) => ({ "data-webhook": w.name })}
      columns={[
        { label: "Name", sort: "name", cell: (w) => <a href={href("s", sk, "webhooks", w.name)}>{w.name}</a> },
        { label: "Service", sort: "service_name", cell: (w) => w.service_name },
        { label: "Authentication", sort: "auth_method", cell: (w) => w.auth_method },
        { label: "Invoke URL", cell: (w) => <code>{invokeUrl(sk, w.name)}{w.path}</code> },
        { label: "Actions", cell: (w) => (owned(w.name) ? <OwnedCell reason={owned(w.name)} />
          : <button type="button" class="danger" aria-label={`Delete webhook ${w.name}`} onClick={() => void remove(w)}>Delete</button>) },
      ]} />
    <h2>New webhook</h2>
    {services.data ? <Form id="new-webhook" submit="Create webhook" key={services.data.join()} fields={fieldsOf(services.data)} onSubmit={async (v) => {
      const n = v.name!.trim();
      await api("POST", `/admin/v/4/webhook/${enc(sk)}/${enc(n)}`, { description: v.description, service_name: v.service_name, auth_method: v.auth_method, path: v.path!.trim() });
      go("s", sk, "webhooks", n);
    }} /> : <ErrorBox error={services.error} />}
  </>;
}

function WebhookDetail({ systemKey: sk, name }: { systemKey: string; name: string }) {
  const w = useLoad(() => api<Webhook>("GET", `/admin/v/4/webhook/${enc(sk)}/${enc(name)}`), [sk, name]);
  const services = useLoad(() => api<{ code: string[] }>("GET", `/admin/code/v/1/${enc(sk)}`).then((r) => r.code), [sk]);
  const [saved, setSaved] = useState<string>();
  const owned = usePlatformOwned("webhook")(name);
  return <>
    <h2>Webhook {name}</h2>
    <OwnedNote reason={owned} />
    <ErrorBox error={w.error} />
    {w.data ? <>
      <div class="card"><KV items={[
        ["Invoke URL", <code>{invokeUrl(sk, name)}{w.data.path}</code>, { id: "webhook-url" }],
        ["Methods", METHODS.join(", ")],
        ["Authentication", w.data.auth_method],
      ]} /></div>
      {owned ? null : <h3>Edit</h3>}
      {services.data && !owned ? <Form id="edit-webhook" submit="Save webhook" key={`${w.data.service_name}/${w.data.auth_method}/${w.data.path}/${w.data.description}`}
        fields={fieldsOf(services.data, w.data)} onSubmit={async (v) => {
          await api("PUT", `/admin/v/4/webhook/${enc(sk)}/${enc(name)}`, { description: v.description, service_name: v.service_name, auth_method: v.auth_method, path: v.path!.trim() });
          setSaved(new Date().toLocaleTimeString());
          await w.reload();
        }} /> : null}
      {saved ? <p role="status" id="webhook-saved">saved at {saved}</p> : null}
      <h3>Try it</h3>
      <TryWebhook systemKey={sk} hook={w.data} />
    </> : null}
  </>;
}

/** Invokes the webhook from the page. Its answer is the service's own status and body (not the
 *  API's envelope), so it is shown as it comes; the developer's token goes where the webhook's
 *  authentication looks for one. */
function TryWebhook({ systemKey: sk, hook }: { systemKey: string; hook: Webhook }) {
  const [method, setMethod] = useState("POST");
  const [rest, setRest] = useState("");
  const [body, setBody] = useState("{}");
  const [answer, setAnswer] = useState<{ status: number; text: string }>();
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const send = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    try {
      const headers: Record<string, string> = { "Content-Type": "application/json" };
      let text = body;
      const token = session.token ?? "";
      if (hook.auth_method === "platform_auth") headers["ClearBlade-DevToken"] = token;
      if (hook.auth_method === "http_basic_auth") headers.Authorization = `Basic ${token}`;
      if (hook.auth_method === "payload_auth") {
        let parsed: unknown;
        try { parsed = JSON.parse(body || "{}"); } catch { throw new Error("with payload authentication the body must be a JSON object (the token goes in it)"); }
        text = JSON.stringify({ ...(parsed as object), token });
      }
      const path = rest.trim() ? `/${rest.trim().replace(/^\/+/, "")}` : "";
      const r = await fetch(`${invokeUrl(sk, hook.name)}${path}`, { method, headers, body: method === "GET" ? undefined : text, cache: "no-store" });
      setAnswer({ status: r.status, text: await r.text() });
      setError(undefined);
    } catch (err) { setError(err); setAnswer(undefined); } finally { setBusy(false); }
  };
  return <form class="card form" id="try-webhook" onSubmit={send}>
    <div class="inline-form">
      <div class="field"><label for="try-method">Method</label>
        <select id="try-method" value={method} onChange={(e) => setMethod(e.currentTarget.value)}>{METHODS.map((m) => <option key={m} value={m}>{m}</option>)}</select></div>
      <div class="field"><label for="try-path">Path after the name</label>
        <input id="try-path" value={rest} placeholder={hook.path || "none"} onInput={(e) => setRest(e.currentTarget.value)} /></div>
    </div>
    <div class="field"><label for="try-body">Body</label>
      <textarea id="try-body" rows={3} value={body} onInput={(e) => setBody(e.currentTarget.value)} /></div>
    <ErrorBox error={error} />
    <button type="submit" class="primary" id="try-send" disabled={busy}>Invoke</button>
    {answer ? <div class={`card result ${answer.status < 400 ? "ok" : "bad"}`} id="try-answer" role="status" data-status={String(answer.status)}>
      <strong>HTTP {answer.status}</strong><pre>{answer.text}</pre></div> : null}
  </form>;
}
