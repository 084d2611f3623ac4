// Sessions of a system's users and devices: /admin/v/4/session/{systemKey}/user|device[/count].
import { Elysia } from "elysia";
import { SESSION_KINDS } from "../../domain/sessions.ts";
import { queryOf, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

export const sessionRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  let app = new Elysia();
  for (const kind of SESSION_KINDS) {
    const base = `/admin/v/4/session/:systemKey/${kind}`;
    app = app
      .get(base, caller((p, { request, params }) => s.sessions.list(p, params.systemKey, kind, queryOf(request).get("query"))))
      .get(`${base}/count`, caller((p, { request, params }) => s.sessions.count(p, params.systemKey, kind, queryOf(request).get("query"))))
      .delete(base, caller((p, { request, params }) => s.sessions.revoke(p, params.systemKey, kind, queryOf(request).get("query")))) as unknown as Elysia;
  }
  return app;
};
