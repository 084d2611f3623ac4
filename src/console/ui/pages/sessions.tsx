// A system's sessions: the live tokens its users and devices were issued. Each list is searched,
// sorted and paged on the server, with how many match; a session is revoked with Revoke, or every
// one the search matches at once. A revoked token stops working at once and its MQTT clients are
// closed.
import { useState } from "preact/hooks";
import { api, caselessPattern, enc } from "../api.ts";
import { ErrorBox, Tabs } from "../components/bits.tsx";
import { ListView, type ListQuery } from "../components/list.tsx";
import { when } from "../format.ts";
import { href } from "../router.ts";
import { useSystemName, useSystemTrail } from "../trail.ts";

interface UserSession { user_id: string; issued: number; email?: string }
interface DeviceSession { device_key: string; issued: number }
type Filter = Record<string, unknown>;

/** The query parameter of OR groups of AND filters, sorted and paged when asked. */
const queryOf = (groups: Filter[][], q?: ListQuery) =>
  `query=${enc(JSON.stringify({ FILTERS: groups, ...(q ? { SORT: [{ [q.sorting.desc ? "DESC" : "ASC"]: q.sorting.field }], PAGESIZE: q.pageSize, PAGENUM: q.page } : {}) }))}`;

export function Sessions({ systemKey: sk }: { systemKey: string }) {
  const sys = useSystemName(sk);
  useSystemTrail(sk, sys, ["Sessions", href("s", sk, "sessions")]);
  return <>
    <h1>{sys}</h1>
    <Tabs systemKey={sk} on="Sessions" />
    <UserSessions systemKey={sk} />
    <DeviceSessions systemKey={sk} />
  </>;
}

function UserSessions({ systemKey: sk }: { systemKey: string }) {
  const base = `/admin/v/4/session/${enc(sk)}/user`;
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<unknown>();
  const [matching, setMatching] = useState<{ search: string; groups: Filter[][] }>({ search: "", groups: [] });
  /** A search by email: the users whose email holds the text, then their sessions. */
  const groupsFor = async (search: string): Promise<Filter[][] | null> => {
    if (!search) return [];
    const users = await api<{ user_id: string }[]>("GET", `/admin/user/${enc(sk)}?query=${enc(JSON.stringify({ FILTERS: [[{ RE: [{ email: caselessPattern(search) }] }]], PAGESIZE: 100, PAGENUM: 1 }))}`);
    return users.length ? users.map((u) => [{ EQ: [{ user_id: u.user_id }] }]) : null;
  };
  const revoke = async (groups: Filter[][], what: string) => {
    if (!confirm(`Revoke ${what}?`)) return;
    try {
      const r = await api<{ count: number }>("DELETE", `${base}?${queryOf(groups)}`);
      setError(undefined);
      setVersion((v) => v + 1);
      return r.count;
    } catch (e) { setError(e); }
  };
  return <>
    <h2>User sessions</h2>
    <ErrorBox error={error} />
    <ListView<UserSession> id="user-sessions" label="User sessions by email" reloadKey={version} initialSort={{ field: "issued", desc: true }}
      filters={<button type="button" class="danger" id="revoke-users-matching"
        onClick={() => void revoke(matching.groups, matching.search ? `every session of users whose email holds "${matching.search}"` : "every user session of the system")}>Revoke all that match</button>}
      load={async (q) => {
        const groups = await groupsFor(q.search);
        setMatching({ search: q.search, groups: groups ?? [[{ EQ: [{ user_id: "" }] }]] });
        if (!groups) return { rows: [], total: 0 };
        const [rows, n] = await Promise.all([api<UserSession[]>("GET", `${base}?${queryOf(groups, q)}`), api<{ count: number }>("GET", `${base}/count?${queryOf(groups)}`)]);
        // each session's user by email (one query for the page)
        const ids = [...new Set(rows.map((r) => r.user_id))];
        const users = ids.length ? await api<{ user_id: string; email: string }[]>("GET", `/admin/user/${enc(sk)}?query=${enc(JSON.stringify({ FILTERS: ids.map((id) => [{ EQ: [{ user_id: id }] }]), PAGESIZE: ids.length, PAGENUM: 1 }))}`) : [];
        const email = new Map(users.map((u) => [u.user_id, u.email]));
        return { rows: rows.map((r) => ({ ...r, email: email.get(r.user_id) })), total: n.count };
      }}
      rowKey={(r) => `${r.user_id}/${r.issued}`} rowAttrs={(r) => ({ "data-session": r.email ?? r.user_id })}
      columns={[
        { label: "User", sort: "user_id", cell: (r) => <>{r.email ?? ""}<br /><code class="muted">{r.user_id}</code></> },
        { label: "Issued", sort: "issued", cell: (r) => when(r.issued) },
        { label: "Actions", cell: (r) => <button type="button" class="danger" aria-label={`Revoke the session of ${r.email ?? r.user_id} issued ${when(r.issued)}`}
          onClick={() => void revoke([[{ EQ: [{ user_id: r.user_id }] }, { EQ: [{ issued: r.issued }] }]], `the session of ${r.email ?? r.user_id} issued ${when(r.issued)}`)}>Revoke</button> },
      ]} />
  </>;
}

function DeviceSessions({ systemKey: sk }: { systemKey: string }) {
  const base = `/admin/v/4/session/${enc(sk)}/device`;
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<unknown>();
  const [search, setSearch] = useState("");
  const groupsFor = (s: string): Filter[][] => (s ? [[{ RE: [{ device_name: caselessPattern(s) }] }]] : []);
  const nameOf = (key: string) => key.split(" :: ").slice(1).join(" :: ") || key;
  const revoke = async (groups: Filter[][], what: string) => {
    if (!confirm(`Revoke ${what}?`)) return;
    try { await api("DELETE", `${base}?${queryOf(groups)}`); setError(undefined); setVersion((v) => v + 1); } catch (e) { setError(e); }
  };
  return <>
    <h2>Device sessions</h2>
    <ErrorBox error={error} />
    <ListView<DeviceSession> id="device-sessions" label="Device sessions by device name" reloadKey={version} initialSort={{ field: "issued", desc: true }}
      filters={<button type="button" class="danger" id="revoke-devices-matching"
        onClick={() => void revoke(groupsFor(search), search ? `every session of devices whose name holds "${search}"` : "every device session of the system")}>Revoke all that match</button>}
      load={async (q) => {
        setSearch(q.search);
        const groups = groupsFor(q.search);
        const [rows, n] = await Promise.all([api<DeviceSession[]>("GET", `${base}?${queryOf(groups, q)}`), api<{ count: number }>("GET", `${base}/count?${queryOf(groups)}`)]);
        return { rows, total: n.count };
      }}
      rowKey={(r) => `${r.device_key}/${r.issued}`} rowAttrs={(r) => ({ "data-session": nameOf(r.device_key) })}
      columns={[
        { label: "Device", sort: "device_key", cell: (r) => nameOf(r.device_key) },
        { label: "Issued", sort: "issued", cell: (r) => when(r.issued) },
        { label: "Actions", cell: (r) => <button type="button" class="danger" aria-label={`Revoke the session of ${nameOf(r.device_key)} issued ${when(r.issued)}`}
          onClick={() => void revoke([[{ EQ: [{ device_key: r.device_key }] }, { EQ: [{ issued: r.issued }] }]], `the session of ${nameOf(r.device_key)} issued ${when(r.issued)}`)}>Revoke</button> },
      ]} />
  </>;
}
