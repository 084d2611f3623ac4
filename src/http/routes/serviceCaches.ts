// Service cache definitions (the caches code services share) under /admin/v/4/service_caches.
import { Elysia } from "elysia";
import { jsonBody, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

export const serviceCacheRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  const c = s.serviceCaches;
  return new Elysia()
    .get("/admin/v/4/service_caches/:systemKey", caller((p, { params }) => c.list(p, params.systemKey)))
    .get("/admin/v/4/service_caches/:systemKey/:name", caller((p, { params }) => c.get(p, params.systemKey, params.name)))
    .post("/admin/v/4/service_caches/:systemKey/:name", caller(async (p, { request, params }) => c.create(p, params.systemKey, params.name, await jsonBody(request))))
    .put("/admin/v/4/service_caches/:systemKey/:name", caller(async (p, { request, params }) => c.update(p, params.systemKey, params.name, await jsonBody(request))))
    .delete("/admin/v/4/service_caches/:systemKey/:name", caller((p, { params }) => c.remove(p, params.systemKey, params.name)));
};
