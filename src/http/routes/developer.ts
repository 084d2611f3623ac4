// Developer accounts and platform admin operations (docs/api.md).
import { Elysia } from "elysia";
import { jsonBody, tokenOf, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

export const developerRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  return new Elysia()
    .post("/admin/reg", async ({ request }) => s.developers.register(await jsonBody(request)))
    .post("/admin/auth", async ({ request }) => s.developers.authenticate(await jsonBody(request)))
    // the token header carries the challenge's intermediate token, not a session
    .post("/admin/auth/verify", async ({ request }) => s.developers.verifyTwoFactor(tokenOf(request), await jsonBody(request)))
    .post("/admin/logout", caller((p) => s.developers.logout(p)))
    .post("/admin/checkauth", caller((p) => s.developers.checkAuth(p)))
    .get("/admin/userinfo", caller((p) => s.developers.info(p)))
    .put("/admin/userinfo", caller(async (p, { request }) => s.developers.updateInfo(p, await jsonBody(request))))
    .put("/admin/putpass", caller(async (p, { request }) => s.developers.changePassword(p, await jsonBody(request))))
    .post("/admin/resetpassword", caller(async (p, { request }) => s.developers.resetPassword(p, await jsonBody(request))))
    .get("/admin/pkey", caller((p) => s.developers.licenseKey(p)))
    .post("/admin/devkeys", caller(async (p, { request }) => s.developerKeys.create(p, await jsonBody(request))))
    .get("/admin/devkeys", caller((p) => s.developerKeys.list(p)))
    .delete("/admin/devkeys/:key", caller((p, { params }) => s.developerKeys.revoke(p, params.key)));
};
