// Users: the user-token API and the developer's user administration under
// /admin/user/{systemKey} (docs/api.md).
import { Elysia } from "elysia";
import { callerOf, jsonBody, optionalPrincipalOf, plain, queryOf, reusedJson, systemKeyOf, systemSecretOf, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

export const userRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  return new Elysia()
    .post("/api/v/1/user/reg", async ({ request }) =>
      s.users.register(systemKeyOf(request), systemSecretOf(request), await optionalPrincipalOf(s.tokens, request), await jsonBody(request)))
    .post("/api/v/1/user/auth", async ({ request }) => s.users.authenticate(systemKeyOf(request), systemSecretOf(request), await jsonBody(request)))
    .post("/api/v/1/user/anon", async ({ request }) => s.users.anonymous(systemKeyOf(request), systemSecretOf(request)))
    .post("/api/v/1/user/checkauth", caller((p, { request }) => s.users.checkAuth(p, systemKeyOf(request))))
    .post("/api/v/1/user/logout", caller((p) => s.users.logout(p)))
    .get("/api/v/1/user/info", plain((request) => {
      const p = callerOf(s.tokens, request);
      if (p instanceof Promise) return p.then((q) => s.users.info(q));
      // an answer from the caches is the same object while the row and its schema are
      const info = s.users.info(p);
      return info instanceof Promise ? info : reusedJson(info, null, "", () => info);
    }))
    .put("/api/v/1/user/info", caller(async (p, { request }) => s.users.updateInfo(p, await jsonBody(request))))
    .post("/api/v/1/user/info", caller(async (p, { request }) => s.users.createAsUser(p, await jsonBody(request), systemKeyOf(request))))
    .delete("/api/v/1/user/info", caller(async (p, { request }) =>
      s.users.deleteBySecret(p, systemKeyOf(request), systemSecretOf(request), await jsonBody(request))))
    .put("/api/v/2/user/info", caller(async (p, { request }) => s.users.updateByQuery(p, await jsonBody(request), systemKeyOf(request))))
    .put("/api/v/1/user/pass", caller(async (p, { request }) => s.users.changePassword(p, await jsonBody(request))))
    .put("/api/v/4/user/manage", caller(async (p, { request }) => s.users.manage(p, await jsonBody(request), systemKeyOf(request))))
    .get("/api/v/1/user", caller((p, { request }) => s.users.list(p, queryOf(request).get("query"), systemKeyOf(request))))
    .get("/api/v/1/user/count", caller((p, { request }) => s.users.count(p, queryOf(request).get("query"), systemKeyOf(request))))
    .get("/api/v/1/user/columns", caller((p, { request }) => s.users.columns(p, systemKeyOf(request))))
    // developer administration
    .get("/admin/user/:systemKey", caller((p, { request, params }) => s.users.adminList(p, params.systemKey, queryOf(request).get("query"))))
    .post("/admin/user/:systemKey", caller(async (p, { request, params }) => s.users.adminCreate(p, params.systemKey, await jsonBody(request))))
    .put("/admin/user/:systemKey", caller(async (p, { request, params }) => s.users.adminUpdate(p, params.systemKey, await jsonBody(request))))
    .delete("/admin/user/:systemKey", caller((p, { request, params }) => s.users.adminDelete(p, params.systemKey, queryOf(request).get("user"))))
    .get("/admin/user/:systemKey/count", caller((p, { request, params }) => s.users.adminCount(p, params.systemKey, queryOf(request).get("query"))))
    .get("/admin/user/:systemKey/columns", caller(async (p, { params }) => {
      await s.systems.accessAsDeveloper(p, params.systemKey);
      return s.users.columns(p, params.systemKey);
    }))
    .post("/admin/user/:systemKey/columns", caller(async (p, { request, params }) => s.users.addColumn(p, params.systemKey, await jsonBody(request))))
    .delete("/admin/user/:systemKey/columns", caller((p, { request, params }) => {
      const q = queryOf(request);
      return s.users.deleteColumn(p, params.systemKey, q.get("column") ?? q.get("column_name"));
    }));
};
