// Devices: the device API and the developer's /admin/devices routes (docs/api.md).
import { Elysia } from "elysia";
import { jsonBody, principalOf, queryOf } from "../request.ts";
import type { Services } from "../services.ts";

type P = Record<string, string>;
const sk = (params: unknown) => (params as P).systemKey!;
const nm = (params: unknown) => (params as P).name!;

export const deviceRoutes = (s: Services) => {
  const auth = (request: Request) => principalOf(s.tokens, request);
  let app = new Elysia()
    .post("/api/v/2/devices/:systemKey/auth", async ({ request, params }) => s.devices.authenticate(params.systemKey, await jsonBody(request))) as unknown as Elysia;

  // listing and bulk operations: user path and developer path share the handlers
  for (const base of ["/api/v/2/devices/:systemKey", "/admin/devices/:systemKey"]) {
    app = app
      .get(base, async ({ request, params }) => s.devices.list(await auth(request), sk(params), queryOf(request).get("query")))
      // an array of device bodies, each with its name (POST .../{name} creates one)
      .post(base, async ({ request, params }) => s.devices.createMany(await auth(request), sk(params), await jsonBody(request)))
      .put(base, async ({ request, params }) => s.devices.bulkUpdate(await auth(request), sk(params), await jsonBody(request)))
      .delete(base, async ({ request, params }) => s.devices.bulkDelete(await auth(request), sk(params), queryOf(request).get("query"))) as unknown as Elysia;
  }
  app = app
    .get("/api/v/3/devices/:systemKey/count", async ({ request, params }) => s.devices.count(await auth(request), params.systemKey, queryOf(request).get("query")))
    .get("/api/v/3/devices/:systemKey/columns", async ({ request, params }) => s.devices.columns(await auth(request), params.systemKey))
    .get("/admin/devices/:systemKey/columns", async ({ request, params }) => s.devices.columns(await auth(request), params.systemKey))
    .post("/admin/devices/:systemKey/columns", async ({ request, params }) => s.devices.addColumn(await auth(request), params.systemKey, await jsonBody(request)))
    .delete("/admin/devices/:systemKey/columns", async ({ request, params }) => {
      const q = queryOf(request);
      return s.devices.deleteColumn(await auth(request), params.systemKey, q.get("column_name") ?? q.get("column"));
    })
    .get("/api/v/4/devices/:systemKey/connections", async ({ request, params }) => s.devices.connectionsList(await auth(request), params.systemKey))
    .get("/api/v/4/devices/:systemKey/connections/:name", async ({ request, params }) => s.devices.connectionInfo(await auth(request), params.systemKey, params.name))
    .get("/api/v/4/devices/:systemKey/connectioncount", async ({ request, params }) => s.devices.connectionCount(await auth(request), params.systemKey))
    .get("/admin/devices/keys/:systemKey/:name", async ({ request, params }) => s.devices.keyInfo(await auth(request), params.systemKey, params.name))
    .post("/admin/devices/keys/:systemKey/:name", async ({ request, params }) => s.devices.createKeys(await auth(request), params.systemKey, params.name, await jsonBody(request)))
    .put("/admin/devices/keys/:systemKey/:name", async ({ request, params }) => s.devices.rotateKeys(await auth(request), params.systemKey, params.name))
    .delete("/admin/devices/keys/:systemKey/:name", async ({ request, params }) => s.devices.deleteKeys(await auth(request), params.systemKey, params.name))
    .get("/admin/devices/roles/:systemKey/:name", async ({ request, params }) => s.devices.rolesOf(await auth(request), params.systemKey, params.name))
    .put("/admin/devices/roles/:systemKey/:name", async ({ request, params }) => s.devices.changeRoles(await auth(request), params.systemKey, params.name, await jsonBody(request))) as unknown as Elysia;

  // one device: user path and developer path
  for (const base of ["/api/v/2/devices/:systemKey/:name", "/admin/devices/:systemKey/:name"]) {
    app = app
      .get(base, async ({ request, params }) => s.devices.get(await auth(request), sk(params), nm(params)))
      .post(base, async ({ request, params }) => s.devices.create(await auth(request), sk(params), nm(params), await jsonBody(request)))
      .put(base, async ({ request, params }) => s.devices.update(await auth(request), sk(params), nm(params), await jsonBody(request)))
      .delete(base, async ({ request, params }) => s.devices.remove(await auth(request), sk(params), nm(params))) as unknown as Elysia;
  }
  return app;
};
