// A system's users: server-side search by email, sort and pages; create and delete; each links to
// its own page (user.tsx).
import { useState } from "preact/hooks";
import { api, caselessPattern, enc, queryParam } from "../api.ts";
import { ErrorBox, Tabs } from "../components/bits.tsx";
import { Form } from "../components/form.tsx";
import { ListView } from "../components/list.tsx";
import { href } from "../router.ts";
import { useSystemName, useSystemTrail } from "../trail.ts";

interface User { user_id: string; email: string; creation_date?: string; roles?: string[] }

export function Users({ systemKey: sk }: { systemKey: string }) {
  const name = useSystemName(sk);
  useSystemTrail(sk, name, ["Users", href("s", sk, "users")]);
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<unknown>();
  const remove = async (u: User) => {
    if (!confirm(`Delete the user ${u.email}?`)) return;
    try { await api("DELETE", `/admin/user/${enc(sk)}?user=${enc(u.user_id)}`); setVersion((v) => v + 1); setError(undefined); } catch (e) { setError(e); }
  };
  return <>
    <h1>{name}</h1>
    <Tabs systemKey={sk} on="Users" />
    <ErrorBox error={error} />
    <ListView<User> id="users-table" label="Users" reloadKey={version} initialSort={{ field: "email", desc: false }}
      load={async (q) => {
        const filters = q.search ? [{ RE: [{ email: caselessPattern(q.search) }] }] : [];
        // a page of users, and how many match (the list answers the page only)
        const [rows, n] = await Promise.all([
          api<User[]>("GET", `/admin/user/${enc(sk)}?${queryParam({ filters, sort: [q.sorting.field, q.sorting.desc ? "DESC" : "ASC"], pageSize: q.pageSize, page: q.page })}`),
          api<{ count: number }>("GET", `/admin/user/${enc(sk)}/count?${queryParam({ filters })}`),
        ]);
        return { rows, total: n.count };
      }}
      rowKey={(u) => u.user_id} rowAttrs={(u) => ({ "data-user": u.email })}
      columns={[
        { label: "Email", sort: "email", cell: (u) => <a href={href("s", sk, "users", u.user_id)}>{u.email}</a> },
        { label: "User id", cell: (u) => <code>{u.user_id}</code> },
        { label: "Actions", cell: (u) => <button type="button" class="danger" aria-label={`Delete user ${u.email}`} onClick={() => void remove(u)}>Delete</button> },
      ]} />
    <h2>New user</h2>
    <Form id="new-user" submit="Create user" fields={[
      { name: "email", label: "Email", type: "email", required: true, check: (v) => (/^[^@\s]+@[^@\s]+$/.test(v.trim()) ? "" : "an email address: name@host") },
      { name: "password", label: "Password", type: "password", required: true },
    ]} onSubmit={async (v) => { await api("POST", `/admin/user/${enc(sk)}`, { email: v.email!.trim(), password: v.password }); setVersion((n) => n + 1); }} />
  </>;
}
