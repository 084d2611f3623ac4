// User secrets (/api/v/4/user_secrets/{systemKey}[/{name}]): the body of a create or update is the
// value itself (any JSON); the answer of a write is a string (ClearBlade's Go client reads one),
// a read's the value as it was stored.
import { Elysia } from "elysia";
import { jsonBody, queryOf, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

const JSON_HEADERS = { "content-type": "application/json; charset=utf-8" };
/** Any JSON value as the answer (a bare string or number stays JSON). */
const asJson = (v: unknown) => new Response(JSON.stringify(v), { headers: JSON_HEADERS });

export const userSecretRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  const u = s.userSecrets;
  return new Elysia()
    .get("/api/v/4/user_secrets/:systemKey", caller((p, { request, params }) => u.list(p, params.systemKey, queryOf(request).get("query") ?? undefined)))
    .delete("/api/v/4/user_secrets/:systemKey", caller(async (p, { request, params }) => asJson(await u.removeMatching(p, params.systemKey, queryOf(request).get("query") ?? undefined))))
    .get("/api/v/4/user_secrets/:systemKey/:name", caller(async (p, { params }) => asJson(await u.get(p, params.systemKey, params.name))))
    .post("/api/v/4/user_secrets/:systemKey/:name", caller(async (p, { request, params }) => asJson(await u.create(p, params.systemKey, params.name, await jsonBody(request)))))
    .put("/api/v/4/user_secrets/:systemKey/:name", caller(async (p, { request, params }) => asJson(await u.update(p, params.systemKey, params.name, await jsonBody(request)))))
    .delete("/api/v/4/user_secrets/:systemKey/:name", caller(async (p, { params }) => asJson(await u.remove(p, params.systemKey, params.name))));
};
