// External databases under /api/v/4/external-db/{systemKey}.
import { Elysia } from "elysia";
import { jsonBody, principalOf } from "../request.ts";
import type { Services } from "../services.ts";

export const externalDbRoutes = (s: Services) => {
  const auth = (r: Request) => principalOf(s.tokens, r);
  const x = s.externalDbs;
  return new Elysia()
    .get("/api/v/4/external-db/:systemKey", async ({ request, params }) => x.list(await auth(request), params.systemKey))
    .post("/api/v/4/external-db/:systemKey", async ({ request, params }) => x.create(await auth(request), params.systemKey, await jsonBody(request)))
    .get("/api/v/4/external-db/:systemKey/:name", async ({ request, params }) => x.get(await auth(request), params.systemKey, params.name))
    .put("/api/v/4/external-db/:systemKey/:name", async ({ request, params }) => x.update(await auth(request), params.systemKey, params.name, await jsonBody(request)))
    .delete("/api/v/4/external-db/:systemKey/:name", async ({ request, params }) => x.remove(await auth(request), params.systemKey, params.name))
    .post("/api/v/4/external-db/:systemKey/:name/data", async ({ request, params }) => x.data(await auth(request), params.systemKey, params.name, await jsonBody(request)));
};
