// Roles: developer paths under /admin/user/{systemKey}/roles
// and the user-token path /api/v/3/user/roles/{systemKey}.
import { Elysia } from "elysia";
import { jsonBody, principalOf, queryOf } from "../request.ts";
import type { Services } from "../services.ts";

const sk = (params: unknown) => (params as { systemKey: string }).systemKey;

export const roleRoutes = (s: Services) => {
  const app = new Elysia();
  for (const base of ["/admin/user/:systemKey/roles", "/api/v/3/user/roles/:systemKey"]) {
    app
      .get(base, async ({ request, params }) => {
        const q = queryOf(request);
        return s.roles.list(await principalOf(s.tokens, request), sk(params), { query: q.get("query"), user: q.get("user"), device: q.get("device") });
      })
      .post(base, async ({ request, params }) => s.roles.create(await principalOf(s.tokens, request), sk(params), await jsonBody(request)))
      .put(base, async ({ request, params }) => s.roles.update(await principalOf(s.tokens, request), sk(params), await jsonBody(request)))
      .delete(base, async ({ request, params }) => {
        const q = queryOf(request);
        return s.roles.remove(await principalOf(s.tokens, request), sk(params), q.get("role") ?? q.get("query") ?? q.get("id"));
      })
      .get(`${base}/count`, async ({ request, params }) => {
        const q = queryOf(request);
        return s.roles.count(await principalOf(s.tokens, request), sk(params), q.get("query") ?? q.get("user"));
      });
  }
  return app;
};
