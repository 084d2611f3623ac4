// System management (docs/api.md). Served with and without /v/4.
import { Elysia } from "elysia";
import { systemToWire } from "../../domain/systems.ts";
import { jsonBody, principalOf, queryOf } from "../request.ts";
import type { Services } from "../services.ts";

export const systemRoutes = (s: Services) => {
  const app = new Elysia();
  for (const base of ["/admin/systemmanagement", "/admin/v/4/systemmanagement"]) {
    app
      .get(base, async ({ request }) => systemToWire(await s.systems.accessAsDeveloper(await principalOf(s.tokens, request), queryOf(request).get("id"))))
      .post(base, async ({ request }) => systemToWire(await s.systems.create(await principalOf(s.tokens, request), await jsonBody(request))))
      .put(base, async ({ request }) => systemToWire(await s.systems.update(await principalOf(s.tokens, request), await jsonBody(request))))
      .delete(base, async ({ request }) => {
        await s.systems.remove(await principalOf(s.tokens, request), queryOf(request).get("id"));
        return {};
      });
  }
  return app
    .get("/admin/allapps", async ({ request }) => (await s.systems.list(await principalOf(s.tokens, request))).map(systemToWire))
    .get("/admin/allsystems", async ({ request }) => (await s.systems.list(await principalOf(s.tokens, request))).map(systemToWire))
    .put("/admin/regensystemsecret", async ({ request }) => {
      const row = await s.systems.regenerateSecret(await principalOf(s.tokens, request), await jsonBody(request));
      return { ...systemToWire(row), secret: row.system_secret };
    });
};
