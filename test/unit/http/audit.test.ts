// What the HTTP API tells the audit trail: the asset class of each write route (listed, or the
// first word of an unlisted route's path), the routes that change no asset, and secrets kept out.
import { describe, expect, test } from "bun:test";
import { redacted, RULES, ruleOf } from "../../../src/http/audit.ts";

describe("audit rules", () => {
  test("listed routes: their class and the parameter naming the asset", () => {
    expect(ruleOf("/api/v/1/data/:key")).toMatchObject({ cls: "collections", id: "key", collectionId: true });
    expect(ruleOf("/admin/devices/:systemKey/:name")).toMatchObject({ cls: "devices", id: "name" });
    expect(ruleOf("/admin/user/:systemKey/roles")).toMatchObject({ cls: "rolesperms" });
    expect(ruleOf("/api/v/1/user/pass")).toMatchObject({ cls: "users", action: "User Password Reset" });
    expect(ruleOf("/admin/putpass")).toMatchObject({ cls: "developers", action: "Developer Password Reset" });
    expect(ruleOf("/admin/v/4/session/:systemKey/device")).toMatchObject({ cls: "devicesessions" });
  });

  test("sign-ins, publishes and runs are not asset changes", () => {
    for (const r of ["/admin/auth", "/api/v/1/user/auth", "/api/v/1/message/:systemKey/publish", "/api/v/1/code/:systemKey/:name", "/api/v/4/webhook/execute/:systemKey/:name"])
      expect(ruleOf(r)).toBeNull();
  });

  test("an unlisted route: the first word of its path that is not a prefix, a version or a parameter", () => {
    expect(ruleOf("/admin/:systemKey/deployments")).toEqual({ cls: "deployments" });
    expect(ruleOf("/admin/:systemKey/deployments/:name")).toEqual({ cls: "deployments", id: "name" });
    expect(ruleOf("/api/v/4/bucket_sets/:systemKey/:name")).toEqual({ cls: "bucket_sets", id: "name" });
    expect(Object.keys(RULES).length).toBeGreaterThan(50);
  });

  test("secrets' values are replaced, at any depth; other values kept", () => {
    expect(redacted({ email: "a@b.c", password: "p", new_password: "n", nested: { client_secret: "s", list: [{ token: "t", n: 1 }] }, key: "k", keys: ["x"] }))
      .toEqual({ email: "a@b.c", password: "(redacted)", new_password: "(redacted)", nested: { client_secret: "(redacted)", list: [{ token: "(redacted)", n: 1 }] }, key: "(redacted)", keys: ["x"] });
    expect(redacted([{ name: "d1", active_key: "chosen-key" }, { activeKey: "k2", type: "t" }]))
      .toEqual([{ name: "d1", active_key: "(redacted)" }, { activeKey: "(redacted)", type: "t" }]);
    expect(redacted([1, "two", null])).toEqual([1, "two", null]);
  });
});

test("a 2FA code and a settings test message change no asset; portals and settings have their class", () => {
  for (const r of ["/admin/auth/verify", "/admin/settings/email-service/test", "/admin/settings/sms-service/test"]) expect(ruleOf(r)).toBeNull();
  expect(ruleOf("/api/v/2/portals/:systemKey/:name")).toEqual({ cls: "portals", id: "name" });
  expect(ruleOf("/admin/settings/security")?.cls).toBe("settings");
});
