// How times and counts read in the console.

export function ago(epochS: number | null | undefined, now = Date.now()): string {
  if (!epochS) return "never";
  const s = Math.max(0, Math.round(now / 1000 - epochS));
  if (s < 120) return `${s}s ago`;
  if (s < 7200) return `${Math.round(s / 60)}m ago`;
  if (s < 172_800) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86_400)}d ago`;
}

export const when = (epochS: number | null | undefined) => (epochS ? new Date(epochS * 1000).toLocaleString() : "");

/** Where a template entry (or the asset it brings) comes from, as the API names it. */
export const sourceText = (source: string | undefined) => (!source ? "–" : source === "edge" ? "this edge" : source.startsWith("template:") ? `template ${source.slice(9)}` : source);
