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

const oneSource = (s: string) => (s === "edge" ? "this edge" : s.startsWith("template:") ? `template ${s.slice(9)}` : s.startsWith("deployment:") ? `deployment ${s.slice(11)}` : s);
/** Where a template entry (or the asset it brings) comes from, as the API names it (several,
 *  comma-separated, when a deployment brings it too). */
export const sourceText = (source: string | undefined) => (!source ? "–" : source.split(",").map(oneSource).join(", "));
