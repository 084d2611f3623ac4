// External databases under /api/v/4/external-db/{systemKey}.
import { Elysia } from "elysia";
import { jsonBody, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

export const externalDbRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  const x = s.externalDbs;
  return new Elysia()
    .get("/api/v/4/external-db/:systemKey", caller((p, { params }) => x.list(p, params.systemKey)))
    .post("/api/v/4/external-db/:systemKey", caller(async (p, { request, params }) => x.create(p, params.systemKey, await jsonBody(request))))
    .get("/api/v/4/external-db/:systemKey/:name", caller((p, { params }) => x.get(p, params.systemKey, params.name)))
    .put("/api/v/4/external-db/:systemKey/:name", caller(async (p, { request, params }) => x.update(p, params.systemKey, params.name, await jsonBody(request))))
    .delete("/api/v/4/external-db/:systemKey/:name", caller((p, { params }) => x.remove(p, params.systemKey, params.name)))
    .post("/api/v/4/external-db/:systemKey/:name/data", caller(async (p, { request, params }) => x.data(p, params.systemKey, params.name, await jsonBody(request))));
};
