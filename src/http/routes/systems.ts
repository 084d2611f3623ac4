// System management (docs/api.md). Served with and without /v/4.
import { Elysia } from "elysia";
import { systemToWire } from "../../domain/systems.ts";
import { jsonBody, queryOf, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

export const systemRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  const app = new Elysia();
  for (const base of ["/admin/systemmanagement", "/admin/v/4/systemmanagement"]) {
    app
      .get(base, caller(async (p, { request }) => systemToWire(await s.systems.accessAsDeveloper(p, queryOf(request).get("id")))))
      .post(base, caller(async (p, { request }) => systemToWire(await s.systems.create(p, await jsonBody(request)))))
      .put(base, caller(async (p, { request }) => systemToWire(await s.systems.update(p, await jsonBody(request)))))
      .delete(base, caller(async (p, { request }) => {
        await s.systems.remove(p, queryOf(request).get("id"));
        return {};
      }));
  }
  return app
    .get("/admin/allapps", caller(async (p) => (await s.systems.list(p)).map(systemToWire)))
    .get("/admin/allsystems", caller(async (p) => (await s.systems.list(p)).map(systemToWire)))
    .put("/admin/regensystemsecret", caller(async (p, { request }) => {
      const row = await s.systems.regenerateSecret(p, await jsonBody(request));
      return { ...systemToWire(row), secret: row.system_secret };
    }))
    // ClearBlade's CLI asks which system upload format the platform takes before a push or an
    // import: "0" is the one that sends every asset on its own route
    .get("/api/v/1/systemmigration/:systemKey/upload", caller(async (p, { params }) => {
      await s.systems.accessAsDeveloper(p, params.systemKey);
      return { version: "0" };
    }));
};
