// Webhooks: management on the developer paths,
// and invocation with any of five methods at /api/v/4/webhook/execute/{systemKey}/{name}[/more/path].
import { Elysia } from "elysia";
import { fail } from "../../core/errors.ts";
import type { WebhookCall } from "../../domain/webhooks.ts";
import { jsonBody, queryOf, textBody, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

const EXECUTE = "/api/v/4/webhook/execute/";
const NO_BODY = new Set([204, 205, 304]);

/** What the domain needs from the request; the path after the name comes from the raw URL. */
async function readCall(request: Request): Promise<{ systemKey: string; name: string; call: WebhookCall }> {
  const url = new URL(request.url);
  const decode = (x: string) => { try { return decodeURIComponent(x); } catch { throw fail("INVALID_ARGUMENT", `path element '${x}' is not valid percent-encoding`); } };
  const parts = url.pathname.slice(EXECUTE.length).split("/");
  while (parts.length > 2 && parts[parts.length - 1] === "") parts.pop(); // a trailing slash
  const [systemKey = "", name = "", ...rest] = parts.map(decode);
  return {
    systemKey, name,
    call: {
      method: request.method, uri: url.pathname, rest, query: queryOf(request).entries(),
      headers: [...request.headers.entries()], body: await textBody(request), logging: request.headers.get("logging-enabled") === "true",
    },
  };
}

export const webhookRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  const invoke = async ({ request }: { request: Request }) => {
    const { systemKey, name, call } = await readCall(request);
    const r = await s.webhooks.invoke(systemKey, name, call);
    if (r instanceof Response) return r;
    return new Response(NO_BODY.has(r.status) ? null : r.body, { status: r.status, headers: r.headers });
  };
  let app = new Elysia()
    .get("/admin/v/4/webhook/:systemKey", caller((p, { params }) => s.webhooks.list(p, params.systemKey)))
    .get("/admin/v/4/webhook/:systemKey/:name", caller((p, { params }) => s.webhooks.get(p, params.systemKey, params.name)))
    .post("/admin/v/4/webhook/:systemKey/:name", caller(async (p, { request, params }) => s.webhooks.create(p, params.systemKey, params.name, await jsonBody(request))))
    .put("/admin/v/4/webhook/:systemKey/:name", caller(async (p, { request, params }) => s.webhooks.update(p, params.systemKey, params.name, await jsonBody(request))))
    .delete("/admin/v/4/webhook/:systemKey/:name", caller((p, { params }) => s.webhooks.remove(p, params.systemKey, params.name))) as unknown as Elysia;
  for (const path of [`${EXECUTE}:systemKey/:name`, `${EXECUTE}:systemKey/:name/*`])
    for (const method of ["GET", "POST", "PUT", "DELETE", "PATCH"]) app = app.route(method, path, invoke) as unknown as Elysia;
  return app;
};
