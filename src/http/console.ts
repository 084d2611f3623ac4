// The web console (/console): static files carried by the binary. It is a client of the public API
// like any other (it signs in through /admin/auth and calls the same routes), so it needs no
// route of its own beyond its files.
import { randomBytes } from "node:crypto";
import { Elysia } from "elysia";
import { fail } from "../core/errors.ts";
import { consoleAssets } from "../console/assets.ts";

/** The console's pages may load only their own files and talk only to this server. */
const HEADERS = {
  "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  // browsers that predate frame-ancestors
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "cache-control": "no-cache",
};

/** A client that takes no gzip (curl, a script) gets the text, unpacked once. */
const unpacked = new Map<string, string>();

async function file(name: string, request: Request): Promise<Response> {
  const f = (await consoleAssets())[name];
  if (!f) throw fail("ROUTE_NOT_FOUND", "no such console file");
  if (f.gzip !== undefined) {
    const headers = { "content-type": f.type, ...HEADERS, vary: "Accept-Encoding" };
    if (/\bgzip\b/.test(request.headers.get("accept-encoding") ?? "")) return new Response(Buffer.from(f.gzip, "base64"), { headers: { ...headers, "content-encoding": "gzip" } });
    let text = unpacked.get(name);
    if (text === undefined) unpacked.set(name, (text = Buffer.from(Bun.gunzipSync(Buffer.from(f.gzip, "base64"))).toString("utf8")));
    return new Response(text, { headers });
  }
  const body = f.body ?? "";
  if (name !== "index.html") return new Response(body, { headers: { "content-type": f.type, ...HEADERS } });
  // the code editor (CodeMirror) writes its styles into a <style> element: the page names a
  // nonce of its own, new with each load, which the editor puts on it and the policy admits
  const nonce = randomBytes(16).toString("base64");
  return new Response(body.replaceAll("%CSP_NONCE%", nonce), {
    headers: { "content-type": f.type, ...HEADERS, "content-security-policy": HEADERS["content-security-policy"].replace("style-src 'self'", `style-src 'self' 'nonce-${nonce}'`) },
  });
}

export const consoleRoutes = () => new Elysia()
  .get("/console", ({ request }) => file("index.html", request))
  .get("/console/", ({ request }) => file("index.html", request))
  .get("/console/:file", ({ params, request }) => file(params.file, request));
