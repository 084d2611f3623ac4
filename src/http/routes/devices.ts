// Devices: the device API and the developer's /admin/devices routes (docs/api.md).
import { Elysia } from "elysia";
import { jsonBody, queryOf, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

type P = Record<string, string>;
const sk = (params: unknown) => (params as P).systemKey!;
const nm = (params: unknown) => (params as P).name!;

export const deviceRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  let app = new Elysia()
    .post("/api/v/2/devices/:systemKey/auth", async ({ request, params }) => s.devices.authenticate(params.systemKey, await jsonBody(request))) as unknown as Elysia;

  // listing and bulk operations: user path and developer path share the handlers
  for (const base of ["/api/v/2/devices/:systemKey", "/admin/devices/:systemKey"]) {
    app = app
      .get(base, caller((p, { request, params }) => s.devices.list(p, sk(params), queryOf(request).get("query"))))
      // an array of device bodies, each with its name (POST .../{name} creates one)
      .post(base, caller(async (p, { request, params }) => s.devices.createMany(p, sk(params), await jsonBody(request))))
      .put(base, caller(async (p, { request, params }) => s.devices.bulkUpdate(p, sk(params), await jsonBody(request))))
      .delete(base, caller((p, { request, params }) => s.devices.bulkDelete(p, sk(params), queryOf(request).get("query")))) as unknown as Elysia;
  }
  app = app
    .get("/api/v/3/devices/:systemKey/count", caller((p, { request, params }) => s.devices.count(p, params.systemKey, queryOf(request).get("query"))))
    .get("/api/v/3/devices/:systemKey/columns", caller((p, { params }) => s.devices.columns(p, params.systemKey)))
    .get("/admin/devices/:systemKey/columns", caller((p, { params }) => s.devices.columns(p, params.systemKey)))
    .post("/admin/devices/:systemKey/columns", caller(async (p, { request, params }) => s.devices.addColumn(p, params.systemKey, await jsonBody(request))))
    .delete("/admin/devices/:systemKey/columns", caller((p, { request, params }) => {
      const q = queryOf(request);
      return s.devices.deleteColumn(p, params.systemKey, q.get("column_name") ?? q.get("column"));
    }))
    .get("/api/v/4/devices/:systemKey/connections", caller((p, { params }) => s.devices.connectionsList(p, params.systemKey)))
    .get("/api/v/4/devices/:systemKey/connections/:name", caller((p, { params }) => s.devices.connectionInfo(p, params.systemKey, params.name)))
    .get("/api/v/4/devices/:systemKey/connectioncount", caller((p, { params }) => s.devices.connectionCount(p, params.systemKey)))
    .get("/admin/devices/keys/:systemKey/:name", caller((p, { params }) => s.devices.keyInfo(p, params.systemKey, params.name)))
    .post("/admin/devices/keys/:systemKey/:name", caller(async (p, { request, params }) => s.devices.createKeys(p, params.systemKey, params.name, await jsonBody(request))))
    .put("/admin/devices/keys/:systemKey/:name", caller((p, { params }) => s.devices.rotateKeys(p, params.systemKey, params.name)))
    .delete("/admin/devices/keys/:systemKey/:name", caller((p, { params }) => s.devices.deleteKeys(p, params.systemKey, params.name)))
    .get("/admin/devices/roles/:systemKey/:name", caller((p, { params }) => s.devices.rolesOf(p, params.systemKey, params.name)))
    .put("/admin/devices/roles/:systemKey/:name", caller(async (p, { request, params }) => s.devices.changeRoles(p, params.systemKey, params.name, await jsonBody(request)))) as unknown as Elysia;

  // one device: user path and developer path
  for (const base of ["/api/v/2/devices/:systemKey/:name", "/admin/devices/:systemKey/:name"]) {
    app = app
      .get(base, caller((p, { params }) => s.devices.get(p, sk(params), nm(params))))
      .post(base, caller(async (p, { request, params }) => s.devices.create(p, sk(params), nm(params), await jsonBody(request))))
      .put(base, caller(async (p, { request, params }) => s.devices.update(p, sk(params), nm(params), await jsonBody(request))))
      .delete(base, caller((p, { params }) => s.devices.remove(p, sk(params), nm(params)))) as unknown as Elysia;
  }
  return app;
};
