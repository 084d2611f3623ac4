// One device of a system: its connection (its MQTT connections and live sessions, asked every few
// seconds, and when it was last active), its fields and custom columns edited, its keys rotated (the new key shown
// once), its roles assigned and removed, and deleting it.
import { useState } from "preact/hooks";
import { api, enc, queryParam } from "../api.ts";
import { ErrorBox, KV, LinkPill, Tabs, useLoad, usePoll } from "../components/bits.tsx";
import { type Field, Form } from "../components/form.tsx";
import { changedColumns, type ColumnInfo, columnField } from "../columns.ts";
import { type RoleInfo, RoleMembership } from "../components/roleMembership.tsx";
import { ago, when } from "../format.ts";
import { go, href } from "../router.ts";
import { useSystemName, useSystemTrail } from "../trail.ts";

type DeviceRecord = Record<string, unknown> & {
  name: string; type: string; state: string; description: string; enabled: boolean; allow_key_auth: boolean;
  allow_certificate_auth: boolean; has_keys: boolean; created_date?: number; last_active_date?: number;
};
interface Connection { client_id: string; time_connected: string }

/** The record's own fields a developer edits here (the rest are columns, keys or read-only). */
const FLAGS = [["enabled", "Enabled"], ["allow_key_auth", "Key sign-in allowed"], ["allow_certificate_auth", "Certificate sign-in allowed"]] as const;
const TEXTS = [["type", "Type"], ["state", "State"], ["description", "Description"]] as const;

export function DevicePage({ systemKey: sk, name }: { systemKey: string; name: string }) {
  const sys = useSystemName(sk);
  useSystemTrail(sk, sys, ["Devices", href("s", sk, "devices")], [name, href("s", sk, "devices", name)]);
  const base = `/admin/devices/${enc(sk)}`;
  const device = useLoad(() => api<DeviceRecord>("GET", `${base}/${enc(name)}`), [sk, name]);
  const columns = useLoad(() => api<ColumnInfo[]>("GET", `${base}/columns`).then((cs) => cs.filter((c) => c.UserDefined)), [sk]);
  const roles = useLoad(() => Promise.all([
    api<{ roles: RoleInfo[] }>("GET", `/admin/devices/roles/${enc(sk)}/${enc(name)}`).then((r) => r.roles),
    api<RoleInfo[]>("GET", `/admin/user/${enc(sk)}/roles`),
  ]), [sk, name]);
  const [live, setLive] = useState<Connection[]>();
  const [sessions, setSessions] = useState<number>();
  const [liveError, setLiveError] = useState<unknown>();
  // a device signs in and connects by itself: its connections and sessions are asked again and again
  usePoll(3000, async () => {
    try {
      const [info, count] = await Promise.all([
        api<{ connections: Connection[] }>("GET", `/api/v/4/devices/${enc(sk)}/connections/${enc(name)}`),
        api<{ count: number }>("GET", `/admin/v/4/session/${enc(sk)}/device/count?${queryParam({ filters: [{ EQ: [{ device_name: name }] }] })}`),
      ]);
      setLive(info.connections);
      setSessions(count.count);
      setLiveError(undefined);
    } catch (e) { setLiveError(e); }
  }, [sk, name]);
  const [keys, setKeys] = useState<string[]>();
  const [saved, setSaved] = useState<string>();
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState<string>();
  const act = async (what: string, fn: () => Promise<void>) => {
    setBusy(what);
    try { await fn(); setError(undefined); } catch (e) { setError(e); } finally { setBusy(undefined); }
  };
  const rotate = () => act("rotate", async () => {
    if (!confirm(`Give ${name} new keys? Its old keys stop working now.`)) return;
    const r = await api<{ active_key: string; keys: string[] }>("PUT", `/admin/devices/keys/${enc(sk)}/${enc(name)}`);
    setKeys(r.keys.length ? r.keys : [r.active_key]);
    await device.reload();
  });
  const remove = () => act("delete", async () => {
    if (!confirm(`Delete the device ${name}? It can no longer sign in.`)) return;
    await api("DELETE", `${base}/${enc(name)}`);
    go("s", sk, "devices");
  });
  const d = device.data;
  const fields = (rec: DeviceRecord, cols: ColumnInfo[]): Field[] => [
    ...TEXTS.map(([f, label]) => ({ name: f, label, value: String(rec[f] ?? "") })),
    ...FLAGS.map(([f, label]) => ({ name: f, label, type: "checkbox" as const, value: String(rec[f] === true) })),
    ...cols.map((c) => columnField(c, rec)),
  ];
  return <>
    <h1>{sys}</h1>
    <Tabs systemKey={sk} on="Devices" />
    <h2>Device {name}</h2>
    <ErrorBox error={device.error} />
    {d ? <>
      <div class="card" id="device-head">
        <KV items={[
          ["Connection", live ? <LinkPill connected={live.length > 0} ever={!!d.last_active_date} /> : "…", { id: "device-link", "data-connected": live ? String(live.length > 0) : "" }],
          ["MQTT connections", live?.length ? live.map((c) => <div key={c.client_id}><code>{c.client_id}</code> since {c.time_connected}</div>) : "none", { id: "device-connections" }],
          ["Last active", d.last_active_date ? <span title={when(d.last_active_date)}>{ago(d.last_active_date)}</span> : "never", { id: "device-last-active" }],
          ["Live sessions", sessions === undefined ? "–" : String(sessions), { id: "device-sessions" }],
          ["Keys", d.has_keys ? "set" : "none", { id: "device-keys" }],
          ["Created", when(d.created_date) || "–"],
        ]} />
        <ErrorBox error={liveError} />
        <div class="row actions">
          <button type="button" id="rotate-key" disabled={busy === "rotate"} onClick={() => void rotate()}>Rotate key</button>
          <button type="button" id="delete-device" class="danger" disabled={busy === "delete"} onClick={() => void remove()}>Delete device</button>
        </div>
        {keys ? <p role="status" id="new-key">New key, shown this once: {keys.map((k) => <code key={k}>{k} </code>)}</p> : null}
        <ErrorBox error={error} />
      </div>
      <h3>Fields</h3>
      <ErrorBox error={columns.error} />
      {columns.data ? <Form id="edit-device" submit="Save device" key={JSON.stringify(d)} fields={fields(d, columns.data)}
        onSubmit={async (v) => {
          const changes = changedColumns(columns.data!, v, d);
          for (const [f] of TEXTS) if (v[f] !== String(d[f] ?? "")) changes[f] = v[f];
          for (const [f] of FLAGS) if (v[f] !== String(d[f] === true)) changes[f] = v[f] === "true";
          if (!Object.keys(changes).length) throw new Error("nothing changed");
          await api("PUT", `${base}/${enc(name)}`, changes);
          // said once the form shows what was saved (a new form replaces this one)
          await device.reload();
          setSaved(new Date().toLocaleTimeString());
        }} /> : null}
      {saved ? <p role="status" id="device-saved">saved at {saved}</p> : null}
      <h3>Roles</h3>
      <ErrorBox error={roles.error} />
      {roles.data ? <RoleMembership id="device-roles" who={name} held={roles.data[0]} all={roles.data[1]}
        change={async (c) => { await api("PUT", `/admin/devices/roles/${enc(sk)}/${enc(name)}`, c); await roles.reload(); }} /> : null}
    </> : null}
  </>;
}
