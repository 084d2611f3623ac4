// Devices: records with
// custom columns, key authentication with rotating keys, roles, bulk operations by query and the
// broker's live connections.
import { Port } from "../core/port.ts";
import { z } from "zod";
import { LEVEL } from "../auth/permissions.ts";
import { DeviceKeys, type StoredKey } from "../auth/deviceKeys.ts";
import type { Principal } from "../auth/principal.ts";
import { ApiError, fail, notFound } from "../core/errors.ts";
import { deviceKey, newToken, nowSeconds } from "../core/ids.ts";
import { parseQuery } from "../core/query.ts";
import { knownFields, objectBody, validate } from "../core/validate.ts";
import type { Executor } from "../store/db.ts";
import { DEVICE_COLUMNS, type DeviceChanges, type DeviceRow, devicesRepo } from "../store/devices.ts";
import type { TokenRow } from "../store/tokens.ts";
import { CustomColumns, type CustomSchema } from "./customColumns.ts";
import { DeviceKeyHashes } from "./deviceKeyHashes.ts";
import { deviceKeyJobsRepo } from "../store/deviceKeyJobs.ts";
import type { DomainDeps } from "./deps.ts";
import { rolesToWire, type Roles } from "./roles.ts";
import { Systems } from "./systems.ts";
import { rolesRepo } from "../store/roles.ts";

const QUERY_UPDATE_FIELDS = new Set(["query", "$set"]);

/** What the broker tells about live device connections. */
export interface ConnectionView {
  /** deviceName -> its MQTT connections */
  deviceConnections(systemKey: string): Map<string, { client_id: string; time_connected: string }[]>;
}

const STANDARD = { cb_ttl_override: "int" } as const;
/** A device's custom and standard column values. */
const deviceData = (d: DeviceRow): Record<string, unknown> => JSON.parse(d.data) as Record<string, unknown>;
/** Keys of a create/update body that are not columns. */
const NON_COLUMNS = ["active_key", "keys", "causeTrigger", "device_key", "system_key", "has_keys", "__HostId__", "roles"];

const NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,127}$/;
const MIN_KEY = 6;

const AuthBody = z.union([
  z.object({ grant_type: z.literal("refresh_token", { error: "grant_type must be 'refresh_token'" }), refresh_token: z.string().min(1), access_token: z.string().min(1) }).strict(),
  z.object({ deviceName: z.string().min(1), activeKey: z.string().min(1) }).strict(),
]);

const bool = (v: unknown, field: string): number => {
  if (typeof v === "boolean") return v ? 1 : 0;
  if (v === "true" || v === "false") return v === "true" ? 1 : 0;
  throw fail("INVALID_ARGUMENT", `${field} must be a boolean`);
};
const str = (v: unknown, field: string, max = 10_000): string => {
  if (typeof v !== "string" || v.length > max) throw fail("INVALID_ARGUMENT", `${field} must be a string`);
  return v;
};

const KEY_FIELDS = new Set(["count", "numberOfKeys"]);
/** Devices one bulk create may hold. */
const MAX_CREATE = 10_000;

const activeKeyOf = (v: unknown): string => {
  if (typeof v !== "string" || v.length < MIN_KEY) throw fail("INVALID_ARGUMENT", `active_key must be a string of at least ${MIN_KEY} characters`);
  return v;
};

export class Devices {
  readonly columnsOf: CustomColumns;
  /** computes the argon2id hashes of chosen keys after the requests that set them (started by the composition) */
  readonly keyHashes: DeviceKeyHashes;

  /** `keys` checks device keys (the composition gives it the server's secret key for fast verifiers). */
  /** `connections`: the broker's live connections, attached once it runs (it is built after the domain) */
  constructor(private readonly d: DomainDeps, private readonly systems: Systems, private readonly roles: Roles, private readonly keys = new DeviceKeys(null),
    private readonly connections = new Port<ConnectionView>("device connections")) {
    this.columnsOf = new CustomColumns(d.db, "devices", DEVICE_COLUMNS, STANDARD, NON_COLUMNS, "name", ["cb_ttl_override"]);
    this.keyHashes = new DeviceKeyHashes(d, keys, (tx, systemKey, name) => this.logDevice(tx, systemKey, name));
    d.tokens.registerLoader("device", (row: TokenRow) => this.principalFor(row.system_key!, row.subject_id, row.token_hash));
  }

  /** The principal of an enabled device (code a device defined runs as it); null if there is none. */
  async principalFor(systemKey: string, name: string, tokenHash = ""): Promise<Principal | null> {
    const dev = await devicesRepo.byName(this.d.db, systemKey, name);
    if (!dev || !dev.enabled) return null;
    return { kind: "device", systemKey: dev.system_key, id: dev.name, name: dev.name, roles: await this.roles.rolesOf(this.d.db, dev.system_key, "device", dev.name), tokenHash };
  }

  /** Logs a device for edge sync: its row (with key hashes, so it authenticates on edges too) and roles. */
  private async logDevice(tx: Executor, systemKey: string, name: string) {
    if (!this.d.changes.logs(systemKey)) return;
    const row = await devicesRepo.byName(tx, systemKey, name);
    if (row) await this.d.changes.record(tx, systemKey, "device", name, "upsert", { device: row, roles: await this.roles.rolesOf(tx, systemKey, "device", name) });
  }

  /** The broker registers itself once it is up. */
  private toWire(row: DeviceRow, schema: CustomSchema): Record<string, unknown> {
    const keys = JSON.parse(row.key_hashes) as string[];
    return this.columnsOf.wire(schema, row.data, {
      name: row.name, type: row.type, state: row.state, description: row.description,
      enabled: row.enabled === 1, allow_key_auth: row.allow_key_auth === 1, allow_certificate_auth: row.allow_certificate_auth === 1,
      certificate: row.certificate, has_keys: keys.length > 0, keys: "", device_key: deviceKey(row.system_key, row.name),
      system_key: row.system_key, created_date: row.created_date, last_active_date: row.last_active_date,
    });
  }

  private async guard(p: Principal, systemKey: string, level: number, self?: string) {
    await this.systems.access(p, systemKey);
    // a device may read and update its own record
    if (p.kind === "device" && self !== undefined && p.name === self && (level & (LEVEL.READ | LEVEL.UPDATE)) === level) return;
    await this.d.perms.require(p, { kind: "devices" }, level, "devices");
  }

  private async find(ex: Executor, systemKey: string, name: string): Promise<DeviceRow> {
    const row = await devicesRepo.byName(ex, systemKey, name);
    if (!row) throw notFound("device", name, "Devices");
    return row;
  }

  // ---- authentication -------------------------------------------------------------------------

  async authenticate(systemKey: string, body: unknown) {
    const s = await this.systems.get(systemKey);
    const b = validate(AuthBody, body);
    if ("grant_type" in b) {
      const { issued, row } = await this.d.tokens.refresh("device", b.refresh_token, b.access_token, async (r) => {
        const d = await devicesRepo.byName(this.d.db, s.system_key, r.subject_id);
        return Systems.ttlFor(s, "device", d ? deviceData(d) : {});
      }, (r) => r.system_key === s.system_key);
      return { deviceName: row.subject_id, deviceToken: issued.token, refreshToken: issued.refreshToken, expiresAt: issued.expiresAt };
    }
    const dev = await devicesRepo.byName(this.d.db, s.system_key, b.deviceName);
    let ok = false;
    if (dev && dev.enabled === 1 && dev.allow_key_auth === 1) {
      const hashes = [dev.active_key_hash, ...(JSON.parse(dev.key_hashes) as string[])].filter((h): h is string => !!h);
      const r = await this.keys.check(b.activeKey, hashes, JSON.parse(dev.key_verifiers) as string[]);
      ok = r.ok;
      // argon2id confirmed a chosen key: its verifier makes the next sign-in fast (a cache, never
      // sent to edge sync as a change)
      if (r.learned) await devicesRepo.update(this.d.db, s.system_key, dev.name, { key_verifiers: JSON.stringify(r.learned) });
    } else this.keys.refuse(b.activeKey); // about the time a device with a verifier takes
    this.d.events.emit("Device::DeviceAuth", s.system_key, { deviceName: b.deviceName, is_error: !ok, error: ok ? "" : "invalid device name or key" });
    if (!ok) throw fail("BAD_CREDENTIALS", "invalid device name or active key, or the device is disabled");
    const t = await this.d.tokens.issue(this.d.db, "device", dev!.name, s.system_key, Systems.ttlFor(s, "device", deviceData(dev!)));
    await devicesRepo.touch(this.d.db, s.system_key, dev!.name, nowSeconds());
    return { deviceName: dev!.name, deviceToken: t.token, refreshToken: t.refreshToken, expiresAt: t.expiresAt };
  }

  // ---- records --------------------------------------------------------------------------------

  /** Splits a create/update body into table columns, custom column values and the key. */
  private async parse(ex: Executor, systemKey: string, body: Record<string, unknown>, data: Record<string, unknown>, creating: boolean) {
    const schema = await this.columnsOf.schema(ex, systemKey);
    const cols: DeviceChanges = {};
    const custom: Record<string, unknown> = Object.create(null); // keys from the request
    let activeKey: string | undefined;
    for (const [k, v] of Object.entries(body)) {
      switch (k) {
        case "name": if (!creating) throw fail("INVALID_ARGUMENT", "Not allowed to update field 'name'"); break;
        case "type": case "state": case "description": case "certificate": cols[k] = v === null ? "" : str(v, k); break;
        case "enabled": case "allow_key_auth": case "allow_certificate_auth": cols[k] = bool(v, k); break;
        case "active_key": activeKey = activeKeyOf(v); break;
        case "created_date": case "last_active_date": case "causeTrigger": case "device_key": case "system_key": case "has_keys": case "keys": case "__HostId__":
          break; // server-set or client bookkeeping
        default: custom[k] = v;
      }
    }
    return { schema, cols, data: this.columnsOf.values(schema, custom, data), activeKey };
  }

  /** The stored form of a device's key: a generated one is hashed fast, a chosen one gets its
   *  verifier now and its argon2id hash from a job (deviceKeyHashes.ts). */
  private async storedKey(key: string, generated: boolean): Promise<StoredKey> {
    return generated ? { hash: DeviceKeys.generated(key), verifiers: [] } : this.keys.chosen(key);
  }

  /** The argon2id jobs of chosen keys, written with their devices (a crash loses none). */
  private async queueHashes(tx: Executor, systemKey: string, devices: { name: string; key: StoredKey }[]) {
    const now = Date.now();
    const jobs = devices.filter((d) => d.key.sealed !== undefined)
      .map((d) => ({ pending_hash: d.key.hash, system_key: systemKey, name: d.name, sealed_key: d.key.sealed!, created_ms: now }));
    if (jobs.length) await deviceKeyJobsRepo.insertMany(tx, jobs);
    return jobs.length > 0;
  }

  private newRow(systemKey: string, name: string, cols: DeviceChanges, data: Record<string, unknown>, key: StoredKey, now: number): DeviceRow {
    return {
      system_key: systemKey, name, type: cols.type ?? "", state: cols.state ?? "", description: cols.description ?? "",
      enabled: cols.enabled ?? 1, allow_key_auth: cols.allow_key_auth ?? 1, allow_certificate_auth: cols.allow_certificate_auth ?? 0,
      active_key_hash: key.hash, key_hashes: "[]", certificate: cols.certificate ?? "",
      created_date: now, last_active_date: now, data: JSON.stringify(data), key_verifiers: JSON.stringify(key.verifiers),
    };
  }

  async create(p: Principal, systemKey: string, name: string, body: unknown) {
    await this.guard(p, systemKey, LEVEL.CREATE);
    const b = objectBody(body);
    if (b.name !== undefined && b.name !== name) throw fail("INVALID_ARGUMENT", "name in the body differs from the name in the path");
    if (!NAME_RE.test(name)) throw fail("INVALID_ARGUMENT", `invalid device name '${name}'`);
    const exists = () => fail("ALREADY_EXISTS", `device '${name}' already exists`);
    if (await devicesRepo.byName(this.d.db, systemKey, name)) throw exists();
    const { schema, cols, data, activeKey } = await this.parse(this.d.db, systemKey, b, {}, true);
    const generated = activeKey === undefined ? newToken() : undefined;
    const key = await this.storedKey(activeKey ?? generated!, generated !== undefined);
    const out = await this.d.db.tx(async (tx) => {
      if (await devicesRepo.byName(tx, systemKey, name)) throw exists();
      const row = this.newRow(systemKey, name, cols, data, key, nowSeconds());
      await devicesRepo.insert(tx, row);
      await this.queueHashes(tx, systemKey, [{ name, key }]);
      await this.roles.changeMembership(tx, systemKey, "device", name, { add: ["Authenticated"] });
      await this.logDevice(tx, systemKey, name);
      return this.toWire(row, schema);
    });
    if (key.sealed) this.keyHashes.wake();
    this.d.events.emit("Device::DeviceCreated", systemKey, { deviceName: name, device: out });
    // a key the server chose is shown once, or nobody could ever use it
    return generated ? { ...out, active_key: generated } : out;
  }

  /** POST /api/v/2/devices/{systemKey} (and /admin/devices/{systemKey}) with an array of device
   *  bodies, each with its name: all are created, in one transaction, or none; the answer lists the
   *  records in the same order. An entry that would fail alone refuses the batch, and the error
   *  names its index. */
  async createMany(p: Principal, systemKey: string, body: unknown) {
    await this.guard(p, systemKey, LEVEL.CREATE);
    if (!Array.isArray(body)) throw fail("INVALID_ARGUMENT", "body must be an array of devices (POST .../{name} creates one)");
    if (!body.length) throw fail("INVALID_ARGUMENT", "body: at least one device is required");
    if (body.length > MAX_CREATE) throw fail("INVALID_ARGUMENT", `at most ${MAX_CREATE} devices per request`);
    const indexed = (i: number, e: unknown) => (e instanceof ApiError ? new ApiError(e.kind, `[${i}]: ${e.detail}`) : e);
    const seen = new Set<string>();
    const entries = body.map((e, i) => {
      try {
        const b = objectBody(e, "device");
        const name = b.name;
        if (typeof name !== "string" || !NAME_RE.test(name)) throw fail("INVALID_ARGUMENT", `name: invalid device name '${String(name)}'`);
        if (seen.has(name)) throw fail("INVALID_ARGUMENT", `device '${name}' appears twice in the request`);
        seen.add(name);
        return { name, b };
      } catch (err) { throw indexed(i, err); }
    });
    const clash = async (ex: Executor) => {
      const taken = new Set(await devicesRepo.existing(ex, systemKey, entries.map((e) => e.name)));
      const i = entries.findIndex((e) => taken.has(e.name));
      if (i >= 0) throw fail("ALREADY_EXISTS", `[${i}]: device '${entries[i]!.name}' already exists`);
    };
    await clash(this.d.db);
    const parsed: Awaited<ReturnType<typeof this.parse>>[] = [];
    for (const [i, e] of entries.entries()) {
      try { parsed.push(await this.parse(this.d.db, systemKey, e.b, {}, true)); } catch (err) { throw indexed(i, err); }
    }
    const generated = parsed.map((r) => (r.activeKey === undefined ? newToken() : undefined));
    const keys = await Promise.all(parsed.map((r, i) => this.storedKey(r.activeKey ?? generated[i]!, generated[i] !== undefined)));
    const schema = parsed[0]!.schema;
    const now = nowSeconds();
    const rows = entries.map((e, i) => this.newRow(systemKey, e.name, parsed[i]!.cols, parsed[i]!.data, keys[i]!, now));
    await this.d.db.tx(async (tx) => {
      await clash(tx);
      await devicesRepo.insertMany(tx, rows);
      await this.queueHashes(tx, systemKey, rows.map((r, i) => ({ name: r.name, key: keys[i]! })));
      for (const r of rows) {
        await this.roles.changeMembership(tx, systemKey, "device", r.name, { add: ["Authenticated"] });
        await this.logDevice(tx, systemKey, r.name);
      }
    });
    if (keys.some((k) => k.sealed)) this.keyHashes.wake();
    return rows.map((row, i) => {
      const out = this.toWire(row, schema);
      this.d.events.emit("Device::DeviceCreated", systemKey, { deviceName: row.name, device: out });
      return generated[i] ? { ...out, active_key: generated[i] } : out;
    });
  }

  async get(p: Principal, systemKey: string, name: string) {
    await this.guard(p, systemKey, LEVEL.READ, name);
    const row = await this.find(this.d.db, systemKey, name);
    return this.toWire(row, await this.columnsOf.schema(this.d.db, systemKey));
  }

  async update(p: Principal, systemKey: string, name: string, body: unknown) {
    await this.guard(p, systemKey, LEVEL.UPDATE, name);
    const b = objectBody(body);
    if (p.kind === "device" && p.name === name) {
      for (const k of ["enabled", "allow_key_auth", "allow_certificate_auth", "active_key", "cb_ttl_override"]) if (k in b) throw fail("PERMISSION_DENIED", `a device cannot change its own '${k}'`);
    }
    return this.applyUpdate(systemKey, name, b);
  }

  private async applyUpdate(systemKey: string, name: string, b: Record<string, unknown>) {
    const quiet = b.causeTrigger === false;
    let disabled = false;
    // a new key's stored form is made before the transaction (parse checks it again inside)
    const newKey = b.active_key === undefined ? undefined : await this.storedKey(activeKeyOf(b.active_key), false);
    const out = await this.d.db.tx(async (tx) => {
      const row = await this.find(tx, systemKey, name);
      const { schema, cols, data, activeKey } = await this.parse(tx, systemKey, b, deviceData(row), false);
      const changes: DeviceChanges = { ...cols, data: JSON.stringify(data) };
      if (activeKey && newKey) {
        // the old key's argon2id job, if still waiting, has nothing left to do
        if (DeviceKeys.isStandIn(row.active_key_hash)) await deviceKeyJobsRepo.remove(tx, row.active_key_hash!);
        await this.queueHashes(tx, systemKey, [{ name, key: newKey }]);
        changes.active_key_hash = newKey.hash;
        changes.key_verifiers = JSON.stringify([...this.keys.keep(JSON.parse(row.key_hashes) as string[], JSON.parse(row.key_verifiers) as string[]), ...newKey.verifiers]);
      }
      disabled = (cols.enabled === 0 && row.enabled === 1) || (cols.allow_key_auth === 0 && row.allow_key_auth === 1) || !!activeKey;
      await devicesRepo.update(tx, systemKey, name, changes);
      await this.logDevice(tx, systemKey, name);
      if (cols.enabled === 0) await this.d.tokens.revokeSubject(tx, "device", name, [], systemKey);
      return this.toWire((await devicesRepo.byName(tx, systemKey, name))!, schema);
    });
    if (disabled) this.d.tokens.forgetSubject("device", name, systemKey);
    if (newKey?.sealed) this.keyHashes.wake();
    const { causeTrigger: _c, active_key: _k, ...changes } = b;
    if (!quiet) this.d.events.emit("Device::DeviceUpdated", systemKey, { deviceName: name, changes });
    return out;
  }

  async remove(p: Principal, systemKey: string, name: string) {
    await this.guard(p, systemKey, LEVEL.DELETE);
    const device = await this.deleteOne(systemKey, name);
    this.d.events.emit("Device::DeviceDeleted", systemKey, { deviceName: name, device });
    return { success: true };
  }

  private async deleteOne(systemKey: string, name: string) {
    const schema = await this.columnsOf.schema(this.d.db, systemKey);
    const wire = await this.d.db.tx(async (tx) => {
      const row = await this.find(tx, systemKey, name);
      await this.d.tokens.revokeSubject(tx, "device", name, [], systemKey);
      await this.roles.removeSubject(tx, systemKey, "device", name);
      await devicesRepo.delete(tx, systemKey, name);
      await deviceKeyJobsRepo.removeDevice(tx, systemKey, name);
      await this.d.changes.record(tx, systemKey, "device", name, "delete", { name });
      return this.toWire(row, schema);
    });
    this.d.tokens.forgetSubject("device", name, systemKey);
    return wire;
  }

  // ---- many at once ---------------------------------------------------------------------------

  private async matching(systemKey: string, query: unknown, paged: boolean) {
    const schema = await this.columnsOf.schema(this.d.db, systemKey);
    const q = parseQuery(query ?? undefined, paged ? {} : { defaultPageSize: 0 });
    const rows = await devicesRepo.list(this.d.db, systemKey, q, schema.map, { paged });
    return { schema, q, rows };
  }

  async list(p: Principal, systemKey: string, query: string | null) {
    await this.guard(p, systemKey, LEVEL.READ);
    const { schema, rows, q } = await this.matching(systemKey, query, true);
    return this.columnsOf.selected(schema, q, rows.map((r) => this.toWire(r, schema)));
  }

  async count(p: Principal, systemKey: string, query: string | null) {
    await this.guard(p, systemKey, LEVEL.READ);
    const schema = await this.columnsOf.schema(this.d.db, systemKey);
    const q = parseQuery(query ?? undefined);
    return { count: await devicesRepo.count(this.d.db, systemKey, q.filters, schema.map) };
  }

  /** PUT /api/v/2/devices/{systemKey}: `{query, $set}` on every matching device. */
  async bulkUpdate(p: Principal, systemKey: string, body: unknown) {
    await this.guard(p, systemKey, LEVEL.UPDATE);
    const b = objectBody(body);
    knownFields(b, QUERY_UPDATE_FIELDS);
    if (b.query === undefined) throw fail("INVALID_ARGUMENT", "query is required");
    const set = objectBody(b.$set, "$set");
    if (!Object.keys(set).length) throw fail("INVALID_ARGUMENT", "$set needs at least one column");
    const { rows } = await this.matching(systemKey, b.query, false);
    const out: Record<string, unknown>[] = [];
    for (const r of rows) out.push(await this.applyUpdate(systemKey, r.name, { ...set }));
    return { DATA: out, TOTAL: out.length };
  }

  /** DELETE /api/v/2/devices/{systemKey}?query=: the query is required. */
  async bulkDelete(p: Principal, systemKey: string, query: string | null) {
    await this.guard(p, systemKey, LEVEL.DELETE);
    if (!query) throw fail("INVALID_ARGUMENT", "query is required (use [] to delete every device)");
    const { rows } = await this.matching(systemKey, query, false);
    for (const r of rows) {
      const device = await this.deleteOne(systemKey, r.name);
      this.d.events.emit("Device::DeviceDeleted", systemKey, { deviceName: r.name, device });
    }
    return { success: true, count: rows.length };
  }

  // ---- columns --------------------------------------------------------------------------------

  async columns(p: Principal, systemKey: string) {
    await this.guard(p, systemKey, LEVEL.READ);
    return this.columnsOf.list(systemKey);
  }
  async addColumn(p: Principal, systemKey: string, body: unknown) {
    await this.systems.accessAsDeveloper(p, systemKey);
    await this.columnsOf.add(systemKey, body);
    return {};
  }
  async deleteColumn(p: Principal, systemKey: string, name: string | null) {
    await this.systems.accessAsDeveloper(p, systemKey);
    await this.columnsOf.remove(systemKey, name, (tx, n) => devicesRepo.dropDataKey(tx, systemKey, n));
    return {};
  }

  // ---- rotating keys (developer) --------------------------------------------------------------

  /** POST: creates `count` keys, any of which authenticates the device; they are shown once. */
  async createKeys(p: Principal, systemKey: string, name: string, body: unknown) {
    await this.systems.accessAsDeveloper(p, systemKey);
    const b = knownFields(objectBody(body), KEY_FIELDS);
    const count = b.count ?? b.numberOfKeys ?? 1;
    if (typeof count !== "number" || !Number.isInteger(count) || count < 1 || count > 100) throw fail("INVALID_ARGUMENT", "count must be an integer from 1 to 100");
    await this.find(this.d.db, systemKey, name);
    const keys = Array.from({ length: count }, () => newToken());
    const hashes = keys.map((k) => DeviceKeys.generated(k));
    await this.d.db.tx(async (tx) => {
      await devicesRepo.update(tx, systemKey, name, { key_hashes: JSON.stringify(hashes), active_key_hash: hashes[0]!, key_verifiers: "[]" });
      await deviceKeyJobsRepo.removeDevice(tx, systemKey, name);
      await this.logDevice(tx, systemKey, name);
    });
    this.d.tokens.forgetSubject("device", name, systemKey);
    return { active_key: keys[0], keys };
  }

  async keyInfo(p: Principal, systemKey: string, name: string) {
    await this.systems.accessAsDeveloper(p, systemKey);
    const row = await this.find(this.d.db, systemKey, name);
    const n = (JSON.parse(row.key_hashes) as string[]).length;
    return { has_keys: n > 0, count: n };
  }

  /** PUT: a fresh set of as many keys as before; the old ones stop working. */
  async rotateKeys(p: Principal, systemKey: string, name: string) {
    const info = await this.keyInfo(p, systemKey, name);
    return this.createKeys(p, systemKey, name, { count: Math.max(1, info.count) });
  }

  async deleteKeys(p: Principal, systemKey: string, name: string) {
    await this.systems.accessAsDeveloper(p, systemKey);
    await this.find(this.d.db, systemKey, name);
    await this.d.db.tx(async (tx) => {
      await devicesRepo.update(tx, systemKey, name, { key_hashes: "[]" });
      await this.logDevice(tx, systemKey, name);
    });
    return {};
  }

  // ---- roles ----------------------------------------------------------------------------------

  async rolesOf(p: Principal, systemKey: string, name: string) {
    await this.guard(p, systemKey, LEVEL.READ, name);
    await this.find(this.d.db, systemKey, name);
    const ids = await this.roles.rolesOf(this.d.db, systemKey, "device", name);
    const rows = await Promise.all(ids.map((id) => rolesRepo.byId(this.d.db, systemKey, id)));
    return { roles: await rolesToWire(this.d.db, systemKey, rows.filter((r) => !!r).map((r) => r!)) };
  }

  async changeRoles(p: Principal, systemKey: string, name: string, body: unknown) {
    await this.systems.accessAsDeveloper(p, systemKey);
    await this.d.db.tx(async (tx) => {
      await this.find(tx, systemKey, name);
      await this.roles.changeMembership(tx, systemKey, "device", name, body);
      await this.logDevice(tx, systemKey, name);
    });
    this.d.tokens.forgetSubject("device", name, systemKey);
    return {};
  }

  // ---- connections (from the broker) ----------------------------------------------------------

  private live(systemKey: string) { return this.connections.get()?.deviceConnections(systemKey) ?? new Map(); }

  async connectionsList(p: Principal, systemKey: string) {
    await this.guard(p, systemKey, LEVEL.READ);
    return Object.fromEntries(this.live(systemKey));
  }

  async connectionInfo(p: Principal, systemKey: string, name: string) {
    const device = await this.get(p, systemKey, name);
    return { ...device, connections: this.live(systemKey).get(name) ?? [], attached_proxies: [] };
  }

  async connectionCount(p: Principal, systemKey: string) {
    await this.guard(p, systemKey, LEVEL.READ);
    const live = this.live(systemKey);
    let total = 0;
    for (const c of live.values()) total += c.length;
    return { total_devices: await devicesRepo.countAll(this.d.db, systemKey), total_device_connections: total, unique_device_connections: live.size };
  }
}
