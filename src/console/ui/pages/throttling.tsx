// A system's throttling cases, with the platform-wide ones that apply to it too.
import { api } from "../api.ts";
import { ErrorBox, Pill, Tabs, useLoad } from "../components/bits.tsx";
import { DataTable } from "../components/table.tsx";
import { useSystemName, useSystemTrail } from "../trail.ts";
import { href } from "../router.ts";

type Case = Record<string, any>;

export function Throttling({ systemKey: sk }: { systemKey: string }) {
  const name = useSystemName(sk);
  useSystemTrail(sk, name, ["Throttling", href("s", sk, "throttling")]);
  const { data, error } = useLoad(async () => {
    const all = await api<{ name: string; cases: Case[] }[]>("GET", "/admin/throttlers");
    // this system's cases and the platform-wide ones (* and ?) that apply to it too
    return all.flatMap((t) => t.cases.filter((c) => c.system_key === sk || !/^[0-9a-f]{20,}$/.test(String(c.system_key))));
  }, [sk]);
  return <>
    <h1>{name}</h1>
    <Tabs systemKey={sk} on="Throttling" />
    <ErrorBox error={error} />
    <DataTable<Case> id="throttling-table" caption="Throttling cases" rows={data ?? []} rowKey={(c) => `${c.throttler_name}/${c.case_name}`} rowAttrs={(c) => ({ "data-case": c.case_name })}
      columns={[
        { label: "Throttler", cell: (c) => c.throttler_name }, { label: "Case", cell: (c) => c.case_name },
        { label: "System", cell: (c) => (c.system_key === sk ? "this system" : c.system_key) }, { label: "Consumer", cell: (c) => c.consumer },
        { label: "Resource", cell: (c) => <code>{c.resource}</code> }, { label: "Limiter", cell: (c) => c.limiter_type },
        { label: "Max", cls: "num", cell: (c) => c.max_num }, { label: "Duration (s)", cls: "num", cell: (c) => c.duration },
        { label: "Priority", cls: "num", cell: (c) => c.priority }, { label: "Kind", cell: (c) => (c.built_in ? <Pill kind="warn">built-in</Pill> : "") },
      ]} />
  </>;
}
