// The proxy an edge reaches its platform through, from the environment as curl and most tools
// read it: HTTPS_PROXY for an https:// platform, HTTP_PROXY for http:// (either spelling's case),
// unless NO_PROXY names the platform's host ("*", a host, a domain suffix such as .example.com,
// an IP, each optionally with :port).
export function proxyFor(platformUrl: string, env: Record<string, string | undefined>): string | undefined {
  const u = new URL(platformUrl);
  const secure = u.protocol === "https:" || u.protocol === "wss:";
  const pick = (name: string) => env[name] ?? env[name.toLowerCase()];
  const proxy = (secure ? pick("HTTPS_PROXY") : pick("HTTP_PROXY"))?.trim();
  if (!proxy) return undefined;
  const host = u.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  const port = u.port || (secure ? "443" : "80");
  for (const raw of (pick("NO_PROXY") ?? "").split(/[\s,]+/)) {
    const entry = raw.trim().toLowerCase();
    if (!entry) continue;
    if (entry === "*") return undefined;
    const m = /^(.*?)(?::(\d+))?$/.exec(entry)!;
    const name = m[1]!.replace(/^\[|\]$/g, "").replace(/^\*?\./, ".");
    if (m[2] && m[2] !== port) continue;
    if (host === name.replace(/^\./, "") || (name.startsWith(".") && host.endsWith(name)) || (!name.startsWith(".") && host.endsWith(`.${name}`))) return undefined;
  }
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(proxy) ? proxy : `http://${proxy}`;
}
