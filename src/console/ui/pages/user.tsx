// One user of a system: its email and custom columns edited, its roles assigned and removed (the
// users update API's roles add/delete), a new password set by the developer, its live sessions
// counted, and deleting it.
import { useState } from "preact/hooks";
import { api, enc, queryParam } from "../api.ts";
import { ErrorBox, KV, Tabs, useLoad } from "../components/bits.tsx";
import { Form } from "../components/form.tsx";
import { changedColumns, type ColumnInfo, columnField } from "../columns.ts";
import { type RoleInfo, RoleMembership } from "../components/roleMembership.tsx";
import { go, href } from "../router.ts";
import { useSystemName, useSystemTrail } from "../trail.ts";

type UserRecord = Record<string, unknown> & { user_id: string; email: string; creation_date?: string };

export function UserPage({ systemKey: sk, id }: { systemKey: string; id: string }) {
  const sys = useSystemName(sk);
  const user = useLoad(async () => {
    const found = await api<UserRecord[]>("GET", `/admin/user/${enc(sk)}?${queryParam({ filters: [{ EQ: [{ user_id: id }] }] })}`);
    if (!found[0]) throw new Error(`no user ${id} in this system`);
    return found[0];
  }, [sk, id]);
  const email = user.data?.email ?? id;
  useSystemTrail(sk, sys, ["Users", href("s", sk, "users")], [email, href("s", sk, "users", id)]);
  const columns = useLoad(() => api<ColumnInfo[]>("GET", `/admin/user/${enc(sk)}/columns`).then((cs) => cs.filter((c) => c.UserDefined)), [sk]);
  const roles = useLoad(() => Promise.all([
    api<RoleInfo[]>("GET", `/admin/user/${enc(sk)}/roles?user=${enc(id)}`),
    api<RoleInfo[]>("GET", `/admin/user/${enc(sk)}/roles`),
  ]), [sk, id]);
  const sessions = useLoad(() => api<{ count: number }>("GET", `/admin/v/4/session/${enc(sk)}/user/count?${queryParam({ filters: [{ EQ: [{ user_id: id }] }] })}`), [sk, id]);
  const [saved, setSaved] = useState<string>();
  const [passwordSet, setPasswordSet] = useState<string>();
  const [error, setError] = useState<unknown>();
  const update = (changes: Record<string, unknown>) => api("PUT", `/admin/user/${enc(sk)}`, { user: id, changes });
  const remove = async () => {
    if (!confirm(`Delete the user ${email}? Its sessions end now.`)) return;
    try { await api("DELETE", `/admin/user/${enc(sk)}?user=${enc(id)}`); go("s", sk, "users"); } catch (e) { setError(e); }
  };
  const u = user.data;
  return <>
    <h1>{sys}</h1>
    <Tabs systemKey={sk} on="Users" />
    <h2>User {email}</h2>
    <ErrorBox error={user.error} />
    {u ? <>
      <div class="card" id="user-head">
        <KV items={[
          ["Email", u.email, { id: "user-email" }],
          ["User id", <code>{u.user_id}</code>],
          ["Created", u.creation_date ?? "–"],
          ["Live sessions", sessions.data ? String(sessions.data.count) : sessions.error ? "–" : "…", { id: "user-sessions" }],
        ]} />
        <div class="row actions">
          <button type="button" id="delete-user" class="danger" onClick={() => void remove()}>Delete user</button>
        </div>
        <ErrorBox error={error} />
      </div>
      <h3>Email and columns</h3>
      <ErrorBox error={columns.error} />
      {columns.data ? <Form id="edit-user" submit="Save user" key={JSON.stringify(u)}
        fields={[{ name: "email", label: "Email", type: "email", required: true, value: u.email }, ...columns.data.map((c) => columnField(c, u))]}
        onSubmit={async (v) => {
          const changes = changedColumns(columns.data!, v, u);
          if (v.email!.trim() !== u.email) changes.email = v.email!.trim();
          if (!Object.keys(changes).length) throw new Error("nothing changed");
          await update(changes);
          // said once the form shows what was saved (a new form replaces this one)
          await user.reload();
          setSaved(new Date().toLocaleTimeString());
        }} /> : null}
      {saved ? <p role="status" id="user-saved">saved at {saved}</p> : null}
      <h3>Roles</h3>
      <ErrorBox error={roles.error} />
      {roles.data ? <RoleMembership id="user-roles" who={u.email} held={roles.data[0]} all={roles.data[1]}
        change={async (c) => { await update({ roles: c }); await roles.reload(); }} /> : null}
      <h3>Password</h3>
      <Form id="user-password" submit="Set password" fields={[
        { name: "password", label: "New password (the user's sessions end)", type: "password", required: true },
      ]} onSubmit={async (v) => {
        await update({ password: v.password });
        setPasswordSet(new Date().toLocaleTimeString());
        await sessions.reload();
      }} />
      {passwordSet ? <p role="status" id="user-password-set">password set at {passwordSet}</p> : null}
    </> : null}
  </>;
}
