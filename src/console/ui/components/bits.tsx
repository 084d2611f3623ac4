// Small pieces every page uses: status pills, the error box, polling, a page's tabs.
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { useEdgeScope } from "./owned.tsx";
import { EDGE_PAGES } from "../edgeScope.ts";
import { href } from "../router.ts";

export const Pill = ({ kind, children }: { kind: "ok" | "bad" | "warn"; children: ComponentChildren }) => <span class={`pill ${kind}`}>{children}</span>;
export const StatusPill = ({ status }: { status: string }) => <Pill kind={status === "synced" ? "ok" : status === "failed" ? "bad" : "warn"}>{status}</Pill>;
export const LinkPill = ({ connected, ever = true }: { connected: boolean; ever?: boolean }) =>
  <Pill kind={connected ? "ok" : ever ? "bad" : "warn"}>{connected ? "connected" : ever ? "disconnected" : "never connected"}</Pill>;

/** An error shown where it happened, read out by screen readers when it appears. */
export const ErrorBox = ({ error }: { error: unknown }) =>
  error ? <p class="error" role="alert">{error instanceof Error ? error.message : String(error)}</p> : null;

/** Runs `fn` now and every `ms` while the component is shown; never two at once. A page that
 *  goes away stops it, and a late answer is dropped by the page (its state is gone). */
export function usePoll(ms: number, fn: () => Promise<void>, deps: unknown[]) {
  const latest = useRef(fn);
  latest.current = fn;
  useEffect(() => {
    let busy = false, live = true;
    const tick = async () => {
      if (busy || !live) return;
      busy = true;
      try { await latest.current(); } finally { busy = false; }
    };
    void tick();
    const t = setInterval(tick, ms);
    return () => { live = false; clearInterval(t); };
  }, deps);
}

/** The value of an async load, its error, and a way to load again. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): { data: T | undefined; error: unknown; reload: () => Promise<void> } {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<unknown>();
  const latest = useRef(load);
  latest.current = load;
  // answers may come back out of order (a filter changed twice quickly): only the last asked is shown
  const asked = useRef(0);
  const reload = async () => {
    const n = ++asked.current;
    try { const d = await latest.current(); if (n === asked.current) { setData(d); setError(undefined); } }
    catch (e) { if (n === asked.current) setError(e); }
  };
  useEffect(() => { void reload(); }, deps);
  return { data, error, reload };
}

/** A system's pages. */
export const SYSTEM_TABS: [string, string][] = [["Edges", ""], ["Collections", "collections"], ["Services", "services"], ["Users", "users"], ["Devices", "devices"], ["Throttling", "throttling"], ["Messages", "messages"]];
// pages: roles, triggers, timers, webhooks, adapters, topics (pagesa)
SYSTEM_TABS.push(["Roles", "roles"], ["Triggers", "triggers"], ["Timers", "timers"], ["Webhooks", "webhooks"], ["Adapters", "adapters"], ["Topics", "topics"]);
// pages: deployments, caches, files, libraries, running code, sessions, audit (pagesb)
SYSTEM_TABS.push(["Deployments", "deployments"], ["Caches", "caches"], ["Files", "files"], ["Libraries", "libraries"], ["Running", "running"], ["Sessions", "sessions"], ["Audit", "audit"]);
// pages: details (pagesc)
SYSTEM_TABS.push(["Settings", "settings"]);

export function Tabs({ systemKey, on }: { systemKey: string; on: string }) {
  // an edge: its own page first, then the pages it serves
  const edge = useEdgeScope();
  const tabs: [string, string][] = edge ? [["This edge", ""], ...SYSTEM_TABS.filter(([, page]) => EDGE_PAGES.has(page))] : SYSTEM_TABS;
  return <nav class="tabs" aria-label="System pages">
    {tabs.map(([name, page]) => <a key={name} href={page ? href("s", systemKey, page) : edge ? "#/" : href("s", systemKey)} class={on === name ? "on" : undefined} aria-current={on === name ? "page" : undefined}>{name}</a>)}
  </nav>;
}

/** A label and its value, in a definition list. */
export const KV = ({ items }: { items: [string, ComponentChildren, Record<string, unknown>?][] }) =>
  <dl class="kv">{items.map(([k, v, attrs]) => [<dt key={`${k}-t`}>{k}</dt>, <dd key={`${k}-d`} {...attrs}>{v}</dd>])}</dl>;
