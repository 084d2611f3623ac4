// On an edge's page: the latest events of its link as the platform keeps them (connected,
// disconnected and why, refused and why), newest first, read again every 5 s.
import { useState } from "preact/hooks";
import { api, enc } from "../api.ts";
import { ErrorBox, usePoll } from "../components/bits.tsx";
import { DataTable } from "../components/table.tsx";

export interface LinkEvent { time: string; event: string; detail: Record<string, unknown> }

/** events shown (the platform keeps 100) */
const SHOWN = 20;

/** A duration in seconds, in words. */
export function lasted(s: number): string {
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86_400)} d ${Math.floor((s % 86_400) / 3600)} h`;
}

/** What an event's detail says, in words. */
export function linkDetail(e: LinkEvent): string {
  const d = e.detail, str = (k: string) => (typeof d[k] === "string" && d[k] ? d[k] as string : "");
  if (e.event === "connected") {
    const build = [str("version") && `build ${str("version")}`, [str("os"), str("arch")].filter(Boolean).join("/")].filter(Boolean).join(", ");
    const from = d.snapshot ? "sent a full snapshot" : typeof d.resumed_from === "number" ? `resumed from position ${d.resumed_from}` : "";
    return [str("node") && `held by node ${str("node")}`, build, from, str("from") && `from ${str("from")}`].filter(Boolean).join("; ");
  }
  if (e.event === "disconnected") return `${str("cause") || "ended"}${typeof d.lasted_s === "number" ? ` after ${lasted(d.lasted_s)}` : ""}`;
  if (e.event === "refused") return `${str("reason") || "refused"}${str("from") ? ` (from ${str("from")})` : ""}`;
  return JSON.stringify(d);
}

export function EdgeLink({ systemKey: sk, edge }: { systemKey: string; edge: string }) {
  const [events, setEvents] = useState<LinkEvent[]>();
  const [error, setError] = useState<unknown>();
  usePoll(5000, async () => {
    try { setEvents(await api<LinkEvent[]>("GET", `/admin/edges/${enc(sk)}/${enc(edge)}/link?limit=${SHOWN}`)); setError(undefined); } catch (e) { setError(e); }
  }, [sk, edge]);
  return <div id="edge-link-log">
    <ErrorBox error={error} />
    {events && !events.length ? <p class="muted" id="edge-link-empty">No link events yet: the edge has not connected.</p> : null}
    {events?.length ? <DataTable<LinkEvent> id="edge-link-table" caption={`Latest link events of ${edge}, newest first`} rows={events ?? []} rowKey={(e) => `${e.time}/${e.event}/${JSON.stringify(e.detail)}`}
      rowAttrs={(e) => ({ "data-event": e.event })}
      columns={[
        { label: "Time", cell: (e) => <time dateTime={e.time} title={e.time}>{new Date(e.time).toLocaleString()}</time> },
        { label: "Event", cls: "status", cell: (e) => <span class={e.event === "refused" ? "err" : ""}>{e.event}</span> },
        { label: "Detail", cell: (e) => linkDetail(e) },
      ]} /> : null}
  </div>;
}
