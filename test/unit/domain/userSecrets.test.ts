// User secrets in-process: values sealed at rest in their table and in the change log (a system
// with an edge keeps one), opened for the caller; queries on the name only; another system's
// secret of the same name apart; users need the role permission usersecrets.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type App, start } from "../../../src/app.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import { SecretBox } from "../../../src/auth/secrets.ts";
import { loadConfig } from "../../../src/config.ts";
import { userSecretsRepo } from "../../../src/store/userSecrets.ts";

let app: App;
let dev: Principal;
let sk: string, sk2: string;
const VALUE = { private_key: "-----BEGIN PRIVATE KEY----- in-process-marker" };
const err = (p: Promise<unknown>) => p.then(() => null, (e) => ({ code: e?.kind?.code as number, status: e?.kind?.status as number, detail: String(e?.detail ?? e) }));

beforeAll(async () => {
  app = await start(loadConfig(["--db", ":memory:", "--http-port", "0", "--mqtt-port", "0", "--mqtt-ws-port", "0", "--log-level", "silent"]));
  const s = app.services;
  dev = (await s.tokens.resolve((await s.developers.register({ email: "secrets@example.com", password: "pw" })).dev_token))!;
  sk = (await s.systems.create(dev, { name: "s1" })).system_key;
  sk2 = (await s.systems.create(dev, { name: "s2" })).system_key;
  await s.edges.create(dev, sk, "gw", { token: "gw-token-123" }); // the system keeps a change log
});
afterAll(async () => { await app?.stop(); });

describe("user secrets", () => {
  test("sealed in their table and in the change log, opened for the caller", async () => {
    const s = app.services.userSecrets;
    await s.create(dev, sk, "sa", VALUE);
    const row = await userSecretsRepo.get(app.db, sk, "sa");
    expect(row!.sealed).not.toContain("in-process-marker");
    const box = SecretBox.load(app.config.dataDir, app.config.secretKey);
    expect(JSON.parse(box.open(row!.sealed))).toEqual(VALUE);
    const logged = await app.db.all<{ body: string }>(`SELECT body FROM changes WHERE system_key = ? AND asset_type = 'usersecret'`, [sk]);
    expect(logged.length).toBe(1);
    expect(logged[0]!.body).not.toContain("in-process-marker");
    expect(await s.get(dev, sk, "sa")).toEqual(VALUE);
  });

  test("queries filter on the name; another system's secret of the same name is its own", async () => {
    const s = app.services.userSecrets;
    await s.create(dev, sk, "one", 1);
    await s.create(dev, sk, "two", "2");
    await s.create(dev, sk2, "one", "elsewhere");
    expect(await s.find(dev, sk, { FILTERS: [[{ EQ: [{ name: "one" }] }]] })).toEqual([{ name: "one", data: 1 }]);
    expect(await s.get(dev, sk2, "one")).toBe("elsewhere");
    expect((await err(s.list(dev, sk, { FILTERS: [[{ EQ: [{ sealed: "x" }] }]] })))?.status).toBe(400);
    expect(await s.removeMatching(dev, sk, { FILTERS: [[{ EQ: [{ name: "one" }] }]] })).toBe("1 user secret deleted");
    expect(Object.keys(await s.list(dev, sk)).sort()).toEqual(["sa", "two"]);
    expect(await s.get(dev, sk2, "one")).toBe("elsewhere");
  });

  test("a user without the role permission usersecrets is refused; another system's token too", async () => {
    const s = app.services.userSecrets;
    const user: Principal = { kind: "user", systemKey: sk, id: "u", email: "u@example.com", roles: ["Authenticated"], tokenHash: "" };
    expect((await err(s.get(user, sk, "two")))?.status).toBe(401);
    expect((await err(s.create(user, sk, "mine", 1)))?.status).toBe(401);
    expect((await err(s.get(user, sk2, "one")))?.status).toBe(401);
  });
});
