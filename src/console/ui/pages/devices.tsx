// A system's devices: server-side search by name, sort and pages; each device's connection state
// (its MQTT connections, asked every few seconds); create with a key, delete.
import { useState } from "preact/hooks";
import { api, caselessPattern, enc, queryParam } from "../api.ts";
import { ErrorBox, LinkPill, Tabs, usePoll } from "../components/bits.tsx";
import { Form } from "../components/form.tsx";
import { ListView } from "../components/list.tsx";
import { href } from "../router.ts";
import { useSystemName, useSystemTrail } from "../trail.ts";

interface Device { name: string; type: string; state: string; enabled: boolean; allow_key_auth: boolean; has_keys: boolean; last_active_date?: string }

export function Devices({ systemKey: sk }: { systemKey: string }) {
  const name = useSystemName(sk);
  useSystemTrail(sk, name, ["Devices", href("s", sk, "devices")]);
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<unknown>();
  const [live, setLive] = useState<Record<string, unknown[]>>({});
  usePoll(3000, async () => {
    try { setLive(await api<Record<string, unknown[]>>("GET", `/api/v/4/devices/${enc(sk)}/connections`)); } catch (e) { setError(e); }
  }, [sk]);
  const remove = async (d: Device) => {
    if (!confirm(`Delete the device ${d.name}?`)) return;
    try { await api("DELETE", `/admin/devices/${enc(sk)}/${enc(d.name)}`); setVersion((v) => v + 1); setError(undefined); } catch (e) { setError(e); }
  };
  return <>
    <h1>{name}</h1>
    <Tabs systemKey={sk} on="Devices" />
    <ErrorBox error={error} />
    <ListView<Device> id="devices-table" label="Devices" reloadKey={version} initialSort={{ field: "name", desc: false }}
      load={async (q) => {
        const filters = q.search ? [{ RE: [{ name: caselessPattern(q.search) }] }] : [];
        const [rows, n] = await Promise.all([
          api<Device[]>("GET", `/admin/devices/${enc(sk)}?${queryParam({ filters, sort: [q.sorting.field, q.sorting.desc ? "DESC" : "ASC"], pageSize: q.pageSize, page: q.page })}`),
          api<{ count: number }>("GET", `/api/v/3/devices/${enc(sk)}/count?${queryParam({ filters })}`),
        ]);
        return { rows, total: n.count };
      }}
      rowKey={(d) => d.name} rowAttrs={(d) => ({ "data-device": d.name, "data-connected": String(!!live[d.name]?.length) })}
      columns={[
        { label: "Name", sort: "name", cell: (d) => <a href={href("s", sk, "devices", d.name)}>{d.name}</a> },
        { label: "Connection", cls: "link", cell: (d) => <LinkPill connected={!!live[d.name]?.length} ever={!!d.last_active_date} /> },
        { label: "Type", sort: "type", cell: (d) => d.type || "–" },
        { label: "State", cell: (d) => d.state || "–" },
        { label: "Key sign-in", cell: (d) => (d.allow_key_auth ? (d.has_keys ? "on" : "on, no key") : "off") },
        { label: "Enabled", cell: (d) => (d.enabled ? "yes" : "no") },
        { label: "Actions", cell: (d) => <button type="button" class="danger" aria-label={`Delete device ${d.name}`} onClick={() => void remove(d)}>Delete</button> },
      ]} />
    <h2>New device</h2>
    <Form id="new-device" submit="Create device" fields={[
      { name: "name", label: "Name", required: true },
      { name: "type", label: "Type" },
      { name: "active_key", label: "Key (the device signs in with it)", type: "password", required: true, check: (v) => (v.length >= 6 ? "" : "at least 6 characters") },
    ]} onSubmit={async (v) => {
      await api("POST", `/admin/devices/${enc(sk)}/${enc(v.name!.trim())}`, { type: v.type, active_key: v.active_key, allow_key_auth: true, enabled: true, state: "" });
      setVersion((n) => n + 1);
    }} />
  </>;
}
