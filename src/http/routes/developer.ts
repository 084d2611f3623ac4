// Developer accounts and platform admin operations (docs/api.md).
import { Elysia } from "elysia";
import { jsonBody, principalOf } from "../request.ts";
import type { Services } from "../services.ts";

export const developerRoutes = (s: Services) => new Elysia()
  .post("/admin/reg", async ({ request }) => s.developers.register(await jsonBody(request)))
  .post("/admin/auth", async ({ request }) => s.developers.authenticate(await jsonBody(request)))
  .post("/admin/logout", async ({ request }) => s.developers.logout(await principalOf(s.tokens, request)))
  .post("/admin/checkauth", async ({ request }) => s.developers.checkAuth(await principalOf(s.tokens, request)))
  .get("/admin/userinfo", async ({ request }) => s.developers.info(await principalOf(s.tokens, request)))
  .put("/admin/userinfo", async ({ request }) => s.developers.updateInfo(await principalOf(s.tokens, request), await jsonBody(request)))
  .put("/admin/putpass", async ({ request }) => s.developers.changePassword(await principalOf(s.tokens, request), await jsonBody(request)))
  .post("/admin/resetpassword", async ({ request }) => s.developers.resetPassword(await principalOf(s.tokens, request), await jsonBody(request)))
  .get("/admin/pkey", async ({ request }) => s.developers.licenseKey(await principalOf(s.tokens, request)));
