// A developer's sign-in on an edge checked by its platform (see Developers.authenticate).
import type { UpstreamVerdict } from "../../domain/developers.ts";

/** Longest an edge waits for the platform to check a developer's password. */
const VERIFY_TIMEOUT_MS = 5_000;

/** Asks the platform whether a developer's password is right (see Developers.authenticate). */
export async function verifyDeveloper(platformUrl: string, tls: { ca: string } | undefined, proxy: string | undefined, email: string, password: string): Promise<UpstreamVerdict> {
  const base = platformUrl.replace(/\/$/, "");
  try {
    const r = await fetch(`${base}/admin/auth`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ email, password }), signal: AbortSignal.timeout(VERIFY_TIMEOUT_MS), tls, proxy });
    if (r.status === 429) return { verdict: "throttled", retryAfterS: Number(r.headers.get("retry-after")) || 60 };
    if (r.status >= 500) return { verdict: "unreachable", why: `the platform answered ${r.status}` };
    if (r.status !== 200) return { verdict: "refused" };
    const b = (await r.json()) as { user_id?: unknown; dev_token?: unknown };
    // the platform session it opened is not needed here
    if (typeof b.dev_token === "string") void fetch(`${base}/admin/logout`, { method: "POST", headers: { "ClearBlade-DevToken": b.dev_token }, signal: AbortSignal.timeout(VERIFY_TIMEOUT_MS), tls, proxy }).catch(() => {});
    return typeof b.user_id === "string" ? { verdict: "accepted", id: b.user_id } : { verdict: "refused" };
  } catch (err) {
    return { verdict: "unreachable", why: String((err as Error)?.message ?? err) };
  }
}
