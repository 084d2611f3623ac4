// Throttler administration: /admin/throttlers, throttler names URL-encoded.
import { Elysia } from "elysia";
import { jsonBody, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

export const throttlerRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  return new Elysia()
    .get("/admin/throttlers", caller((p) => s.throttlers.list(p)))
    .delete("/admin/throttlers", caller((p) => s.throttlers.clear(p)))
    .get("/admin/throttlers/:name", caller((p, { params }) => s.throttlers.get(p, params.name)))
    .delete("/admin/throttlers/:name", caller((p, { params }) => s.throttlers.clear(p, params.name)))
    .post("/admin/throttlers/:name/cases", caller(async (p, { request, params }) => s.throttlers.create(p, params.name, await jsonBody(request))))
    .put("/admin/throttlers/:name/cases/:caseName", caller(async (p, { request, params }) => s.throttlers.update(p, params.name, params.caseName, await jsonBody(request))))
    .delete("/admin/throttlers/:name/cases/:caseName", caller((p, { params }) => s.throttlers.remove(p, params.name, params.caseName)));
};
