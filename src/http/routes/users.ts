// Users: the user-token API and the developer's user administration under
// /admin/user/{systemKey} (docs/api.md).
import { Elysia } from "elysia";
import { callerOf, jsonBody, optionalPrincipalOf, principalOf, queryOf, systemKeyOf, systemSecretOf } from "../request.ts";
import type { Services } from "../services.ts";

export const userRoutes = (s: Services) => new Elysia()
  .post("/api/v/1/user/reg", async ({ request }) =>
    s.users.register(systemKeyOf(request), systemSecretOf(request), await optionalPrincipalOf(s.tokens, request), await jsonBody(request)))
  .post("/api/v/1/user/auth", async ({ request }) => s.users.authenticate(systemKeyOf(request), systemSecretOf(request), await jsonBody(request)))
  .post("/api/v/1/user/anon", async ({ request }) => s.users.anonymous(systemKeyOf(request), systemSecretOf(request)))
  .post("/api/v/1/user/checkauth", async ({ request }) => s.users.checkAuth(await principalOf(s.tokens, request), systemKeyOf(request)))
  .post("/api/v/1/user/logout", async ({ request }) => s.users.logout(await principalOf(s.tokens, request)))
  .get("/api/v/1/user/info", ({ request }) => { const p = callerOf(s.tokens, request); return p instanceof Promise ? p.then((q) => s.users.info(q)) : s.users.info(p); })
  .put("/api/v/1/user/info", async ({ request }) => s.users.updateInfo(await principalOf(s.tokens, request), await jsonBody(request)))
  .post("/api/v/1/user/info", async ({ request }) => s.users.createAsUser(await principalOf(s.tokens, request), await jsonBody(request), systemKeyOf(request)))
  .delete("/api/v/1/user/info", async ({ request }) =>
    s.users.deleteBySecret(await principalOf(s.tokens, request), systemKeyOf(request), systemSecretOf(request), await jsonBody(request)))
  .put("/api/v/2/user/info", async ({ request }) => s.users.updateByQuery(await principalOf(s.tokens, request), await jsonBody(request), systemKeyOf(request)))
  .put("/api/v/1/user/pass", async ({ request }) => s.users.changePassword(await principalOf(s.tokens, request), await jsonBody(request)))
  .put("/api/v/4/user/manage", async ({ request }) => s.users.manage(await principalOf(s.tokens, request), await jsonBody(request), systemKeyOf(request)))
  .get("/api/v/1/user", async ({ request }) => s.users.list(await principalOf(s.tokens, request), queryOf(request).get("query"), systemKeyOf(request)))
  .get("/api/v/1/user/count", async ({ request }) => s.users.count(await principalOf(s.tokens, request), queryOf(request).get("query"), systemKeyOf(request)))
  .get("/api/v/1/user/columns", async ({ request }) => s.users.columns(await principalOf(s.tokens, request), systemKeyOf(request)))
  // developer administration
  .get("/admin/user/:systemKey", async ({ request, params }) => s.users.adminList(await principalOf(s.tokens, request), params.systemKey, queryOf(request).get("query")))
  .post("/admin/user/:systemKey", async ({ request, params }) => s.users.adminCreate(await principalOf(s.tokens, request), params.systemKey, await jsonBody(request)))
  .put("/admin/user/:systemKey", async ({ request, params }) => s.users.adminUpdate(await principalOf(s.tokens, request), params.systemKey, await jsonBody(request)))
  .delete("/admin/user/:systemKey", async ({ request, params }) => s.users.adminDelete(await principalOf(s.tokens, request), params.systemKey, queryOf(request).get("user")))
  .get("/admin/user/:systemKey/count", async ({ request, params }) => s.users.adminCount(await principalOf(s.tokens, request), params.systemKey, queryOf(request).get("query")))
  .get("/admin/user/:systemKey/columns", async ({ request, params }) => {
    const p = await principalOf(s.tokens, request);
    await s.systems.accessAsDeveloper(p, params.systemKey);
    return s.users.columns(p, params.systemKey);
  })
  .post("/admin/user/:systemKey/columns", async ({ request, params }) => s.users.addColumn(await principalOf(s.tokens, request), params.systemKey, await jsonBody(request)))
  .delete("/admin/user/:systemKey/columns", async ({ request, params }) => {
    const q = queryOf(request);
    return s.users.deleteColumn(await principalOf(s.tokens, request), params.systemKey, q.get("column") ?? q.get("column_name"));
  });
