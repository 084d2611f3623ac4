// Instance settings of the platform admin: security, and the email and SMS services that carry
// developers' sign-in codes (/admin/settings/*).
import { Elysia } from "elysia";
import { jsonBody, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

export const settingsRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  const st = s.settings;
  return new Elysia()
    .get("/admin/settings/security", caller((p) => st.getSecurity(p)))
    .put("/admin/settings/security", caller(async (p, { request }) => st.putSecurity(p, await jsonBody(request))))
    .get("/admin/settings/email-service", caller((p) => st.getEmail(p)))
    .post("/admin/settings/email-service", caller(async (p, { request }) => st.createEmail(p, await jsonBody(request))))
    .put("/admin/settings/email-service", caller(async (p, { request }) => st.updateEmail(p, await jsonBody(request))))
    .delete("/admin/settings/email-service", caller((p) => st.deleteEmail(p)))
    .post("/admin/settings/email-service/test", caller(async (p, { request }) => st.testEmail(p, await jsonBody(request))))
    .get("/admin/settings/sms-service", caller((p) => st.getSms(p)))
    .post("/admin/settings/sms-service", caller(async (p, { request }) => st.createSms(p, await jsonBody(request))))
    .put("/admin/settings/sms-service", caller(async (p, { request }) => st.updateSms(p, await jsonBody(request))))
    .delete("/admin/settings/sms-service", caller((p) => st.deleteSms(p)))
    .post("/admin/settings/sms-service/test", caller(async (p, { request }) => st.testSms(p, await jsonBody(request))));
};
