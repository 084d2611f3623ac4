// Roles: developer paths under /admin/user/{systemKey}/roles
// and the user-token path /api/v/3/user/roles/{systemKey}.
import { Elysia } from "elysia";
import { jsonBody, queryOf, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

const sk = (params: unknown) => (params as { systemKey: string }).systemKey;

export const roleRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  const app = new Elysia();
  for (const base of ["/admin/user/:systemKey/roles", "/api/v/3/user/roles/:systemKey"]) {
    app
      .get(base, caller((p, { request, params }) => {
        const q = queryOf(request);
        return s.roles.list(p, sk(params), { query: q.get("query"), user: q.get("user"), device: q.get("device") });
      }))
      .post(base, caller(async (p, { request, params }) => s.roles.create(p, sk(params), await jsonBody(request))))
      .put(base, caller(async (p, { request, params }) => s.roles.update(p, sk(params), await jsonBody(request))))
      .delete(base, caller((p, { request, params }) => {
        const q = queryOf(request);
        return s.roles.remove(p, sk(params), q.get("role") ?? q.get("query") ?? q.get("id"));
      }))
      .get(`${base}/count`, caller((p, { request, params }) => {
        const q = queryOf(request);
        return s.roles.count(p, sk(params), q.get("query") ?? q.get("user"));
      }));
  }
  return app;
};
