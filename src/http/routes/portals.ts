// Portal records (/admin/portals, /api/v/2/portals) and plugin records (/api/v/2/plugins).
import { Elysia } from "elysia";
import { jsonBody, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

export const portalRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  const p = s.portals;
  return new Elysia()
    .get("/admin/portals/:systemKey", caller((c, { params }) => p.list(c, params.systemKey, "portal")))
    .get("/api/v/2/portals/:systemKey/:name", caller((c, { params }) => p.get(c, params.systemKey, "portal", params.name)))
    .post("/api/v/2/portals/:systemKey/:name", caller(async (c, { request, params }) => p.create(c, params.systemKey, "portal", params.name, await jsonBody(request))))
    .put("/api/v/2/portals/:systemKey/:name", caller(async (c, { request, params }) => p.update(c, params.systemKey, "portal", params.name, await jsonBody(request))))
    .delete("/api/v/2/portals/:systemKey/:name", caller((c, { params }) => p.remove(c, params.systemKey, "portal", params.name)))
    .get("/api/v/2/plugins/:systemKey", caller((c, { params }) => p.list(c, params.systemKey, "plugin")))
    // the name comes in the body
    .post("/api/v/2/plugins/:systemKey", caller(async (c, { request, params }) => {
      const body = await jsonBody(request);
      return p.create(c, params.systemKey, "plugin", (body as { name?: unknown } | null)?.name, body);
    }))
    .get("/api/v/2/plugins/:systemKey/:name", caller((c, { params }) => p.get(c, params.systemKey, "plugin", params.name)))
    .put("/api/v/2/plugins/:systemKey/:name", caller(async (c, { request, params }) => p.update(c, params.systemKey, "plugin", params.name, await jsonBody(request))))
    .delete("/api/v/2/plugins/:systemKey/:name", caller((c, { params }) => p.remove(c, params.systemKey, "plugin", params.name)));
};
