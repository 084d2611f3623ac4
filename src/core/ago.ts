// How long ago a moment was, as people read it ("42s ago", "3h ago", "never"): the CLI's status
// and the web console show times this one way.

export function ago(epochS: number | null | undefined, now = Date.now()): string {
  if (!epochS) return "never";
  const s = Math.max(0, Math.round(now / 1000 - epochS));
  if (s < 120) return `${s}s ago`;
  if (s < 7200) return `${Math.round(s / 60)}m ago`;
  if (s < 172_800) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86_400)}d ago`;
}
