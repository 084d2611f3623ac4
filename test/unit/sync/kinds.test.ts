// Every kind of definition in the sync registry (src/sync/kinds/) does all of it: a platform's
// asset of the kind is listed and read as a change body, applied to another node's database (and
// applied again, as a repeated change is), listed there under the same name, and removed from
// there by name. The domain makes one asset of each kind on a platform (in memory); the other node
// is a fresh database.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type App, start } from "../../../src/app.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import { randomBytes } from "node:crypto";
import { SecretBox } from "../../../src/auth/secrets.ts";
import { loadConfig } from "../../../src/config.ts";
import { DEFINITION_TYPES } from "../../../src/core/syncKinds.ts";
import { SYNC_MODULES } from "../../../src/domain/edges.ts";
import { type Db, openDb } from "../../../src/store/db.ts";
import { migrate } from "../../../src/store/migrations.ts";
import { ASSET_NAME_COLUMNS, assetNames } from "../../../src/store/sync.ts";
import { KINDS, SNAPSHOT_ORDER, staleCaches } from "../../../src/sync/kinds/index.ts";

let app: App;
let other: Db;
let dev: Principal;
let sk = "";
/** the name each kind's asset has on the platform */
const made: Record<string, string> = {};

beforeAll(async () => {
  app = await start(loadConfig(["--db", ":memory:", "--http-port", "0", "--mqtt-port", "0", "--mqtt-ws-port", "0", "--log-level", "silent"]));
  const s = app.services;
  dev = (await s.tokens.resolve((await s.developers.register({ email: "kinds@example.com", password: "pw" })).dev_token))!;
  const sys = await s.systems.create(dev, { name: "kinds" });
  sk = sys.system_key;
  await s.services.createLibrary(dev, sk, "helpers", { code: "var helper = 1;" });
  await s.services.create(dev, sk, "calc", { code: "function calc(req, resp) { resp.success(1); }" });
  await s.collections.createCollection(dev, { name: "readings", appID: sk });
  await s.triggers.createTrigger(dev, sk, "onCreate", { def_module: "Data", def_name: "ItemCreated", service_name: "calc", key_value_pairs: {} });
  await s.triggers.createTimer(dev, sk, "every", { frequency: 3600, repeats: -1, start_time: "Now", service_name: "calc" });
  const role = await s.roles.create(dev, sk, { name: "reader" });
  await s.users.register(sk, sys.system_secret, null, { email: "u@example.com", password: "pw" });
  await s.devices.create(dev, sk, "thermo", { type: "", state: "", enabled: true, allow_key_auth: true, active_key: "k-123456" });
  await s.adapters.create(dev, sk, { name: "modbus", description: "", architecture: "linux-amd64" });
  await s.portals.create(dev, sk, "portal", "floor", { config: { panes: [] } });
  await s.portals.create(dev, sk, "plugin", "gauge", { code: "function gauge() {}" });
  await s.serviceCaches.create(dev, sk, "sessions", { ttl: 60 });
  await s.webhooks.create(dev, sk, "inbound", { service_name: "calc" });
  await s.bucketSets.create(dev, sk, { name: "logs", platform_storage: "local", edge_storage: "local" });
  await s.userSecrets.create(dev, sk, "apikey", { token: "s3cr3t-value" });
  Object.assign(made, { portal: "floor", plugin: "gauge", servicecache: "sessions", webhook: "inbound", bucketset: "logs", usersecret: "apikey", library: "helpers", service: "calc", collection: "readings", trigger: "onCreate", timer: "every", role: (role as { name?: string }).name ?? "reader", user: "u@example.com", device: "thermo", adapter: "modbus" });
  other = await openDb({ url: ":memory:" });
  await migrate(other);
  // the system itself is not synced: the other node has it from its own setup
  await other.run(`INSERT INTO developers(id, email, email_lower, password_hash, creation_date) VALUES ('d', 'd@x', 'd@x', '', '')`);
  await other.run(`INSERT INTO systems(system_key, system_secret, name, owner_id, created_at) VALUES (?, 'secret', 'kinds', 'd', '')`, [sk]);
});
afterAll(async () => { await other?.close(); await app?.stop(); });

describe("the kinds of definitions", () => {
  test("the table has every kind, the snapshot order names each once, templates name each", () => {
    expect(Object.keys(KINDS).sort()).toEqual([...DEFINITION_TYPES].sort());
    expect([...SNAPSHOT_ORDER].sort()).toEqual([...DEFINITION_TYPES].sort());
    for (const t of DEFINITION_TYPES) expect(SYNC_MODULES as readonly string[]).toContain(t);
    // libraries before the services that use them, roles before the users and devices holding them
    const at = (t: string) => SNAPSHOT_ORDER.indexOf(t as never);
    expect(at("library")).toBeLessThan(at("service"));
    expect(at("role")).toBeLessThan(Math.min(at("user"), at("device")));
  });

  test("sync status and template coverage see every kind: the names of a system's assets", async () => {
    expect(Object.keys(ASSET_NAME_COLUMNS).sort()).toEqual([...DEFINITION_TYPES].sort());
    const names = await assetNames(app.db, sk);
    for (const t of DEFINITION_TYPES) expect(names.filter((n) => n.t === t).map((n) => n.name)).toContain(made[t]!);
  });

  test("which caches a change of each kind makes stale", () => {
    expect([...staleCaches(["service"])]).toEqual(["code"]);
    expect([...staleCaches(["library", "service"])]).toEqual(["code"]);
    expect([...staleCaches(["trigger"])]).toEqual(["triggers"]);
    expect([...staleCaches(["user", "device", "role"])]).toEqual(["tokens"]);
    expect([...staleCaches(["servicecache"])]).toEqual(["servicecaches"]);
    expect([...staleCaches(["webhook"])]).toEqual(["webhooks"]);
    expect([...staleCaches(["collection", "timer", "adapter", "row", "nonsense"])]).toEqual([]);
  });

  for (const type of SNAPSHOT_ORDER) {
    test(`${type}: read, applied on another node (twice), listed there, removed by name`, async () => {
      const kind = KINDS[type];
      const mine = (await kind.list(app.db, sk)).find((r) => kind.nameOf(r) === made[type]);
      expect(mine).toBeDefined();
      const body = JSON.parse(JSON.stringify(await kind.body(app.db, sk, mine))); // as it travels
      await other.tx(async (tx) => { await kind.apply(tx, sk, made[type]!, body); await kind.apply(tx, sk, made[type]!, body); });
      const names = async () => (await kind.list(other, sk)).map((r) => kind.nameOf(r));
      expect(await names()).toContain(made[type]!);
      const del = await kind.deleteBody(other, sk, made[type]!);
      expect(del).toBeDefined();
      await other.tx((tx) => kind.remove(tx, sk, made[type]!, del));
      expect(await names()).not.toContain(made[type]!);
      // removing it again (a repeated change) does nothing
      const again = await kind.deleteBody(other, sk, made[type]!);
      if (again !== undefined) await other.tx((tx) => kind.remove(tx, sk, made[type]!, again));
      expect(await names()).not.toContain(made[type]!);
    });
  }

  test("an adapter file whose content is not what its sha256 says is refused, naming the file, and nothing of it is kept", async () => {
    await app.services.adapters.putFile(dev, sk, "modbus", { name: "config.json", file: Buffer.from('{"port": 502}').toString("base64") });
    const a = (await KINDS.adapter.list(app.db, sk)).find((r) => r.name === "modbus");
    const body = JSON.parse(JSON.stringify(await KINDS.adapter.body(app.db, sk, a)));
    expect(body.files.map((f: { name: string }) => f.name)).toEqual(["config.json"]);
    for (const content of ["", Buffer.from("something else").toString("base64"), "not base64!"]) {
      const bad = { ...body, files: [{ ...body.files[0], content }] };
      const err = await other.tx((tx) => KINDS.adapter.apply(tx, sk, "modbus", bad)).then(() => null, (e: Error) => e);
      expect(String(err?.message)).toMatch(/adapter 'modbus': (the content of )?file 'config\.json'/);
      expect(await other.get(`SELECT 1 AS x FROM blobs WHERE hash = ?`, [body.files[0].hash])).toBeUndefined();
    }
    await other.tx((tx) => KINDS.adapter.apply(tx, sk, "modbus", body));
    expect(await other.get(`SELECT 1 AS x FROM blobs WHERE hash = ?`, [body.files[0].hash])).toBeDefined();
  });

  test("a user secret crosses the link opened and is kept sealed under the receiving node's own key", async () => {
    const kind = KINDS.usersecret;
    const platformBox = SecretBox.load(app.config.dataDir, app.config.secretKey); // the key the platform loaded
    const mine = (await kind.list(app.db, sk)).find((r) => r.name === "apikey");
    const kept = await kind.body(app.db, sk, mine) as { sealed: string };
    expect(kept.sealed).not.toContain("s3cr3t-value");
    const travelling = JSON.parse(JSON.stringify(kind.wire!.out(kept, platformBox)));
    expect(travelling).toEqual({ name: "apikey", value: { token: "s3cr3t-value" } });
    const edgeBox = new SecretBox(randomBytes(32));
    const arrived = kind.wire!.in(travelling, edgeBox) as { sealed: string };
    expect(arrived.sealed).not.toContain("s3cr3t-value");
    expect(JSON.parse(edgeBox.open(arrived.sealed))).toEqual({ token: "s3cr3t-value" });
    expect(() => platformBox.open(arrived.sealed)).toThrow();
  });

  test("a node's built-in roles are never removed as missing from a snapshot", async () => {
    for (const name of ["Administrator", "Authenticated", "Anonymous"]) expect(await KINDS.role.deleteBody(app.db, sk, name)).toBeUndefined();
  });
});
