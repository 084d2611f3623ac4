// A system's audit trail: who created, changed or deleted what, newest first. Filtered on the
// server by actor (email, any case), asset class, action and a time range; sorted and paged there
// too, with how many rows match. A row's changes (the body sent, secrets redacted) open in place.
import { useState } from "preact/hooks";
import { api, caselessPattern, enc } from "../api.ts";
import { Tabs } from "../components/bits.tsx";
import { ListView } from "../components/list.tsx";
import { href } from "../router.ts";
import { useSystemName, useSystemTrail } from "../trail.ts";

interface AuditRow { id: number; time: string; response_time: number; asset_class: string; action_type: string; email: string; asset_id: string; changes: string; user_type: string }

const CLASSES = ["system", "users", "devices", "collections", "services", "libraries", "triggers", "timers", "webhooks", "servicecaches", "adaptors", "adaptorFiles",
  "edges", "edgegroups", "deployments", "bucket_sets", "filestore", "messaging", "rolesperms", "usersessions", "devicesessions", "usersecrets", "developers", "externaldbs", "throttlers"];
const ACTIONS = ["Create", "Update", "Delete", "MQTT Connect", "MQTT Disconnect"];

/** A datetime-local input's value (local time) as RFC 3339 in UTC, as the trail keeps times. */
const utc = (local: string) => (local ? new Date(local).toISOString() : "");

export function Audit({ systemKey: sk }: { systemKey: string }) {
  const sys = useSystemName(sk);
  useSystemTrail(sk, sys, ["Audit", href("s", sk, "audit")]);
  const [cls, setCls] = useState("");
  const [action, setAction] = useState("");
  const [from, setFrom] = useState("");
  const [to, setTo] = useState("");
  const base = `/admin/audit/${enc(sk)}`;
  return <>
    <h1>{sys}</h1>
    <Tabs systemKey={sk} on="Audit" />
    <h2>Audit trail</h2>
    <ListView<AuditRow> id="audit-table" label="Audit rows by actor's email" reloadKey={`${cls}/${action}/${from}/${to}`} initialSort={{ field: "time", desc: true }}
      filters={<>
        <label>Asset class <select id="audit-class" value={cls} onChange={(e) => setCls(e.currentTarget.value)}>
          <option value="">any</option>{CLASSES.map((c) => <option key={c} value={c}>{c}</option>)}</select></label>
        <label>Action <select id="audit-action" value={action} onChange={(e) => setAction(e.currentTarget.value)}>
          <option value="">any</option>{ACTIONS.map((a) => <option key={a} value={a}>{a}</option>)}</select></label>
        <label>From <input type="datetime-local" id="audit-from" value={from} onChange={(e) => setFrom(e.currentTarget.value)} /></label>
        <label>To <input type="datetime-local" id="audit-to" value={to} onChange={(e) => setTo(e.currentTarget.value)} /></label>
      </>}
      load={async (q) => {
        const f: Record<string, unknown>[] = [];
        if (q.search) f.push({ RE: [{ email: caselessPattern(q.search) }] });
        if (cls) f.push({ EQ: [{ asset_class: cls }] });
        if (action) f.push({ EQ: [{ action_type: action }] });
        if (from) f.push({ GTE: [{ time: utc(from) }] });
        if (to) f.push({ LTE: [{ time: utc(to) }] });
        const filters = f.length ? [f] : [];
        const query = (paged: boolean) => `query=${enc(JSON.stringify({ FILTERS: filters, ...(paged ? { SORT: [{ [q.sorting.desc ? "DESC" : "ASC"]: q.sorting.field }], PAGESIZE: q.pageSize, PAGENUM: q.page } : {}) }))}`;
        const [rows, n] = await Promise.all([api<AuditRow[]>("GET", `${base}?${query(true)}`), api<{ count: number }>("GET", `${base}/count?${query(false)}`)]);
        return { rows, total: n.count };
      }}
      rowKey={(r) => String(r.id)} rowAttrs={(r) => ({ "data-audit": `${r.action_type} ${r.asset_class} ${r.asset_id}` })}
      columns={[
        { label: "Time", sort: "time", cell: (r) => new Date(r.time).toLocaleString() },
        { label: "Actor", sort: "email", cell: (r) => <>{r.email || <span class="muted">unknown</span>} <span class="muted">({r.user_type})</span></> },
        { label: "Action", sort: "action_type", cell: (r) => r.action_type },
        { label: "Class", sort: "asset_class", cell: (r) => r.asset_class },
        { label: "Asset", sort: "asset_id", cell: (r) => <code>{r.asset_id}</code> },
        { label: "Changes", cell: (r) => (r.changes && r.changes !== "{}" ? <details><summary>changes</summary><pre class="payload">{r.changes}</pre></details> : <span class="muted">–</span>) },
      ]} />
  </>;
}
