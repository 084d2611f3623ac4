// The audit trail: /admin/audit (every system: platform admins) and /admin/audit/{systemKey}
// (the system's developer), each with /count; `query` in ClearBlade's query language.
import { Elysia } from "elysia";
import { queryOf, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

export const auditRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  const q = (request: Request) => queryOf(request).get("query");
  return new Elysia()
    .get("/admin/audit", caller((p, { request }) => s.audit.list(p, null, q(request))))
    .get("/admin/audit/count", caller((p, { request }) => s.audit.count(p, null, q(request))))
    .get("/admin/audit/:systemKey", caller((p, { request, params }) => s.audit.list(p, params.systemKey, q(request))))
    .get("/admin/audit/:systemKey/count", caller((p, { request, params }) => s.audit.count(p, params.systemKey, q(request))));
};
