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

async function file(name: string): Promise<Response> {
  const f = (await consoleAssets())[name];
  if (!f) throw fail("ROUTE_NOT_FOUND", "no such console file");
  if (name !== "index.html") return new Response(f.body, { headers: { "content-type": f.type, ...HEADERS } });
  // the code editor (CodeMirror) writes its styles into a <style> element: the page names a
  // nonce of its own, new with each load, which the editor puts on it and the policy admits
  const nonce = randomBytes(16).toString("base64");
  return new Response(f.body.replaceAll("%CSP_NONCE%", nonce), {
    headers: { "content-type": f.type, ...HEADERS, "content-security-policy": HEADERS["content-security-policy"].replace("style-src 'self'", `style-src 'self' 'nonce-${nonce}'`) },
  });
}

export const consoleRoutes = () => new Elysia()
  .get("/console", () => file("index.html"))
  .get("/console/", () => file("index.html"))
  .get("/console/:file", ({ params }) => file(params.file));
