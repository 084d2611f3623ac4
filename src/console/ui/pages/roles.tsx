// A system's roles: the list (server-side search, sort, pages; create, delete), and one role as a
// permission matrix: a row per asset (each collection, service, topic, webhook and adapter, and
// the kinds granted as a whole), a column per right. A toggle is one role update through the
// API (`changes` with the asset's new level), so what the page shows is what the role grants.
import { useEffect, useState } from "preact/hooks";
import { api, caselessPattern, enc, queryParam } from "../api.ts";
import { ErrorBox, Tabs, useLoad } from "../components/bits.tsx";
import { Form } from "../components/form.tsx";
import { ListView } from "../components/list.tsx";
import { go, href } from "../router.ts";
import { BUILTIN_ROLES, type Role, RIGHTS, matrixRows } from "../permissions.ts";
import { OwnedCell, OwnedNote, usePlatformOwned } from "../components/owned.tsx";
import { useSystemName, useSystemTrail } from "../trail.ts";

export function Roles({ systemKey: sk, id }: { systemKey: string; id?: string }) {
  const sys = useSystemName(sk);
  // a role's page is named by its id until the role is read
  const [roleName, setRoleName] = useState<string>();
  useSystemTrail(sk, sys, ["Roles", href("s", sk, "roles")], ...(id ? [[roleName ?? id, href("s", sk, "roles", id)] as [string, string]] : []));
  return <>
    <h1>{sys}</h1>
    <Tabs systemKey={sk} on="Roles" />
    {id ? <RoleMatrix systemKey={sk} id={id} onName={setRoleName} /> : <RoleList systemKey={sk} />}
  </>;
}

function RoleList({ systemKey: sk }: { systemKey: string }) {
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<unknown>();
  const base = `/admin/user/${enc(sk)}/roles`;
  const owned = usePlatformOwned("role");
  const remove = async (r: Role) => {
    if (!confirm(`Delete the role ${r.Name}? Its users and devices lose what it grants.`)) return;
    try { await api("DELETE", `${base}?role=${enc(r.ID)}`); setVersion((v) => v + 1); setError(undefined); } catch (e) { setError(e); }
  };
  return <>
    <h2>Roles</h2>
    <ErrorBox error={error} />
    <ListView<Role> id="roles-table" label="Roles" reloadKey={version} initialSort={{ field: "name", desc: false }}
      load={async (q) => {
        const filters = q.search ? [{ RE: [{ name: caselessPattern(q.search) }] }] : [];
        const [rows, n] = await Promise.all([
          api<Role[]>("GET", `${base}?${queryParam({ filters, sort: [q.sorting.field, q.sorting.desc ? "DESC" : "ASC"], pageSize: q.pageSize, page: q.page })}`),
          api<{ count: number }>("GET", `${base}/count?${queryParam({ filters })}`),
        ]);
        return { rows, total: n.count };
      }}
      rowKey={(r) => r.ID} rowAttrs={(r) => ({ "data-role": r.Name })}
      columns={[
        { label: "Name", sort: "name", cell: (r) => <a href={href("s", sk, "roles", r.ID)}>{r.Name}</a> },
        { label: "Description", sort: "description", cell: (r) => r.Description || "–" },
        { label: "Actions", cell: (r) => (BUILTIN_ROLES.has(r.ID) ? <span class="muted">built in</span> : owned(r.Name) ? <OwnedCell reason={owned(r.Name)} />
          : <button type="button" class="danger" aria-label={`Delete role ${r.Name}`} onClick={() => void remove(r)}>Delete</button>) },
      ]} />
    <h2>New role</h2>
    <Form id="new-role" submit="Create role" fields={[
      { name: "name", label: "Name", required: true },
      { name: "description", label: "Description" },
    ]} onSubmit={async (v) => {
      const r = await api<{ role_id: string }>("POST", base, { name: v.name!.trim(), description: v.description });
      go("s", sk, "roles", r.role_id);
    }} />
  </>;
}

function RoleMatrix({ systemKey: sk, id, onName }: { systemKey: string; id: string; onName: (name: string) => void }) {
  const base = `/admin/user/${enc(sk)}/roles`;
  const role = useLoad(async () => {
    const [r] = await api<Role[]>("GET", `${base}?${queryParam({ filters: [{ EQ: [{ role_id: id }] }] })}`);
    if (!r) throw new Error(`there is no role ${id} in this system`);
    return r;
  }, [sk, id]);
  // the system's assets, each list on its own: one that cannot be read leaves its rows out
  const assets = useLoad(async () => {
    const quiet = <T,>(p: Promise<T>, dflt: T) => p.catch(() => dflt);
    const [cols, svcs, hooks, adapters, topics] = await Promise.all([
      quiet(api<{ collectionID: string; name: string }[]>("GET", `/admin/allcollections?appid=${enc(sk)}`), []),
      quiet(api<{ code: string[] }>("GET", `/admin/code/v/1/${enc(sk)}`), { code: [] }),
      quiet(api<{ name: string }[]>("GET", `/admin/v/4/webhook/${enc(sk)}`), []),
      quiet(api<{ name: string }[]>("GET", `/api/v/4/${enc(sk)}/adapters`), []),
      quiet(api<string[]>("GET", `/api/v/1/message/${enc(sk)}/currentTopics`), []),
    ]);
    return {
      collections: cols.map((c) => ({ id: c.collectionID, name: c.name })), services: svcs.code.map((name) => ({ name })),
      webhooks: hooks.map((h) => ({ name: h.name })), adapters: adapters.map((a) => ({ name: a.name })), topics: topics.slice(0, 50).map((name) => ({ name })),
    };
  }, [sk]);
  const [busy, setBusy] = useState<string>();
  const [error, setError] = useState<unknown>();
  const [filter, setFilter] = useState("");
  const [topic, setTopic] = useState("");
  // on an edge, a role the platform sent is shown here and changed there
  const ownedBy = usePlatformOwned("role");
  const update = async (key: string, changes: Record<string, unknown>) => {
    setBusy(key);
    try { await api("PUT", base, { id, changes }); await role.reload(); setError(undefined); } catch (e) { setError(e); } finally { setBusy(undefined); }
  };
  useEffect(() => { if (role.data) onName(role.data.Name); }, [role.data?.Name]);
  const r = role.data;
  if (!r) return <ErrorBox error={role.error} />;
  const owned = ownedBy(r.Name);
  const f = filter.trim().toLowerCase();
  const rows = matrixRows(r, assets.data ?? {}).filter((m) => !f || `${m.group} ${m.name}`.toLowerCase().includes(f));
  return <>
    <h2>Role {r.Name}</h2>
    <OwnedNote reason={owned} />
    {r.Description ? <p class="muted">{r.Description}</p> : null}
    {r.ID === "Administrator" ? <p class="muted">The Administrator role may do everything in the system, whatever its matrix shows.</p> : null}
    <div class="row">
      <label>Filter assets <input type="search" id="matrix-filter" value={filter} onInput={(e) => setFilter(e.currentTarget.value)} /></label>
      {owned ? null : <form class="row" id="matrix-topic" onSubmit={(e) => {
        e.preventDefault();
        const t = topic.trim();
        if (t) void update(`topics/${t}`, { topics: [{ itemInfo: { name: t }, permissions: 1 }] }).then(() => setTopic(""));
      }}>
        <label>Grant a topic (subscribe) <input id="matrix-topic-name" placeholder="a/b, a/+, a/#" value={topic} onInput={(e) => setTopic(e.currentTarget.value)} /></label>
        <button type="submit">Add topic</button>
      </form>}
    </div>
    <ErrorBox error={error} />
    <div class="table-box">
      <table id="matrix" class="stack">
        <caption class="sr-only">Permissions of role {r.Name}</caption>
        <thead><tr><th scope="col">Kind</th><th scope="col">Asset</th>{RIGHTS.map(([right]) => <th key={right} scope="col">{right}</th>)}</tr></thead>
        <tbody>
          {rows.map((m) => <tr key={m.key} data-asset={m.key} data-level={String(m.level)}>
            <td data-label="Kind">{m.group}</td>
            <td data-label="Asset">{m.name}</td>
            {RIGHTS.map(([right, bit]) => <td key={right} data-label={right}>
              {m.rights.includes(right)
                ? <input type="checkbox" data-right={right} checked={(m.level & bit) !== 0} disabled={!!owned || busy === m.key}
                    aria-label={`${m.group} ${m.name}: ${right}${m.note?.[right] ? ` (${m.note[right]})` : ""}`}
                    onChange={() => void update(m.key, m.change(m.level ^ bit))} />
                : <span class="muted" aria-hidden="true">–</span>}
            </td>)}
          </tr>)}
        </tbody>
      </table>
    </div>
  </>;
}
