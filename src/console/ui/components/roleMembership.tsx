// The roles a user or a device holds, on its page: assigned and removed one at a time.
import { useState } from "preact/hooks";
import { ErrorBox } from "./bits.tsx";
import { DataTable } from "./table.tsx";

export interface RoleInfo { ID: string; Name: string; Description?: string }

/** The roles a user or device holds, a Remove per role and a picker of the others. `change`
 *  sends one addition or removal to the API; the page reloads what it holds after. */
export function RoleMembership({ id, who, held, all, change }: {
  id: string; who: string; held: RoleInfo[]; all: RoleInfo[];
  change: (c: { add?: string[]; delete?: string[] }) => Promise<void>;
}) {
  const others = all.filter((r) => !held.some((h) => h.ID === r.ID));
  const [pick, setPick] = useState("");
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const send = async (c: { add?: string[]; delete?: string[] }) => {
    setBusy(true);
    try { await change(c); setError(undefined); } catch (e) { setError(e); } finally { setBusy(false); }
  };
  const chosen = others.some((r) => r.ID === pick) ? pick : (others[0]?.ID ?? "");
  return <div id={id}>
    <DataTable<RoleInfo> id={`${id}-table`} caption={`Roles of ${who}`} rows={held} rowKey={(r) => r.ID} rowAttrs={(r) => ({ "data-role": r.Name })}
      columns={[
        { label: "Role", cell: (r) => r.Name },
        { label: "Description", cell: (r) => r.Description || "–" },
        { label: "Actions", cell: (r) => <button type="button" class="remove" aria-label={`Remove role ${r.Name} from ${who}`} disabled={busy}
            onClick={() => void send({ delete: [r.ID] })}>Remove</button> },
      ]} />
    <form class="row" id={`${id}-add`} onSubmit={(e) => { e.preventDefault(); if (chosen) void send({ add: [chosen] }); }}>
      <label>Role to assign <select id={`${id}-pick`} value={chosen} disabled={!others.length} onChange={(e) => setPick(e.currentTarget.value)}>
        {others.map((r) => <option key={r.ID} value={r.ID}>{r.Name}</option>)}
      </select></label>
      <button type="submit" class="primary" disabled={busy || !chosen}>Assign role</button>
    </form>
    <ErrorBox error={error} />
  </div>;
}
