// Adapters: definitions with their
// commands, files with every version kept (contents stored once), control of edges, and the
// adapter as a syncable asset (definition plus current files) for the edges whose template has it.
import { Port } from "../core/port.ts";
import { createHash } from "node:crypto";
import type { Principal } from "../auth/principal.ts";
import { fail, notFound } from "../core/errors.ts";
import { nowIso } from "../core/ids.ts";
import { knownFields, objectBody } from "../core/validate.ts";
import type { Executor } from "../store/db.ts";
import { type AdapterFileRow, type AdapterRow, adapterFilesRepo, adaptersRepo, blobsRepo } from "../store/adapters.ts";
import { edgesRepo } from "../store/edges.ts";
import { CONTROL_COMMANDS, type ControlAdapter, type ControlCommand, type ControlFile, type ControlResult, permissionBits, safeRelativePath } from "../adapters/runner.ts";
import type { DomainDeps } from "./deps.ts";
import type { Edges } from "./edges.ts";
import type { Systems } from "./systems.ts";

/** Adapter and file names: a directory and a file on the edge, so no '/', no leading '.' or '-'
 *  (never '..', never read as an option by the commands run there). */
const NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
/** A file's owner or group: a user or group name as useradd takes it, or a number. */
const ACCOUNT_RE = /^(?:[A-Za-z_][A-Za-z0-9_.-]{0,31}|\d{1,10})$/;
const TEXT_FIELDS = ["description", "protocol", "architecture", "os", "deploy_command", "start_command", "stop_command", "status_command", "undeploy_command", "logs_command"] as const;
const FLAG_FIELDS = ["run_stop_on_deploy", "run_start_on_deploy", "run_deploy_on_deploy"] as const;
/** Fields clients send back from a read; not settable. */
const READ_ONLY = new Set(["version", "system_key", "created_at", "updated_at", "adaptor_name", "adapter_name"]);
const FILE_MAX_BYTES = 64 * 1024 * 1024;
const DEFAULT_TIMEOUT_S = 30;
const MAX_TIMEOUT_S = 600;

/** What the sync channel carries for an adapter: its definition and its current files. */
export interface AdapterBody { adapter: AdapterRow; files: (AdapterFileRow & { content: string })[] }

/** Sends one control command to one edge and waits for its answer (the platform's sync hub). */
export type EdgeControl = (systemKey: string, edge: string, req: { adapter: ControlAdapter; command: ControlCommand; files?: ControlFile[]; timeoutMs: number }) => Promise<ControlResult>;

/** Strict base64 (whitespace allowed between characters); the bytes, or null. */
export function decodeBase64(v: string): Buffer | null {
  const s = v.replace(/\s+/g, "");
  if (s.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) return null;
  return Buffer.from(s, "base64");
}

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

const CONTROL_FIELDS = new Set(["command", "edges", "timeout"]);

export class Adapters {
  /** Set on a platform once the sync hub runs. */

  /** `edgeControl`: commands to an edge's adapters through the sync hub, attached by it (a platform only) */
  constructor(private readonly d: DomainDeps, private readonly systems: Systems, private readonly edges: Edges,
    private readonly edgeControl = new Port<EdgeControl>("edge control")) {}

  private toWire(a: AdapterRow) {
    return {
      name: a.name, ...Object.fromEntries(TEXT_FIELDS.map((k) => [k, a[k]])), ...Object.fromEntries(FLAG_FIELDS.map((k) => [k, a[k] === 1])),
      version: a.version, system_key: a.system_key, created_at: a.created_at, updated_at: a.updated_at,
    };
  }

  private fileToWire(f: AdapterFileRow, content?: Uint8Array | null) {
    return {
      name: f.name, adaptor_name: f.adapter_name, adapter_name: f.adapter_name, path_name: f.path_name, owner: f.owner, group: f.group_name,
      permissions: f.permissions, version: f.version, size: f.size, sha256: f.hash, created_at: f.created_at,
      ...(content !== undefined ? { file: content ? Buffer.from(content).toString("base64") : "" } : {}),
    };
  }

  private async adapter(ex: Executor, systemKey: string, name: string): Promise<AdapterRow> {
    const a = await adaptersRepo.get(ex, systemKey, name);
    if (!a) throw notFound("adapter", name, "Adaptors");
    return a;
  }

  /** Applies the fields of a body over a row (create: over the defaults). */
  private parse(b: Record<string, unknown>, base: AdapterRow): AdapterRow {
    const out = { ...base };
    for (const [k, v] of Object.entries(b)) {
      if (k === "name" || READ_ONLY.has(k)) continue;
      if ((TEXT_FIELDS as readonly string[]).includes(k)) {
        if (typeof v !== "string") throw fail("INVALID_ARGUMENT", `${k} must be a string`);
        (out as Record<string, unknown>)[k] = v;
      } else if ((FLAG_FIELDS as readonly string[]).includes(k)) {
        if (typeof v !== "boolean") throw fail("INVALID_ARGUMENT", `${k} must be a boolean`);
        (out as Record<string, unknown>)[k] = v ? 1 : 0;
      } else throw fail("INVALID_ARGUMENT", `body: unknown field '${k}'`);
    }
    return out;
  }

  /** Puts the adapter's current state in the change log (edges whose template has it follow). */
  private async recordChange(tx: Executor, systemKey: string, name: string) {
    // an edge logs nothing, but refuses a change of an adapter (or its files) its platform sent
    if (this.d.changes.mode === "edge") return this.d.changes.refuseIfPlatformOwned(tx, "adapter", name);
    if (!this.d.changes.logs(systemKey)) return;
    const a = await adaptersRepo.get(tx, systemKey, name);
    if (!a) { await this.d.changes.record(tx, systemKey, "adapter", name, "delete", { name }); return; }
    await this.d.changes.record(tx, systemKey, "adapter", name, "upsert", await adapterBody(tx, a));
  }

  private async bump(tx: Executor, a: AdapterRow) {
    await adaptersRepo.put(tx, { ...a, version: a.version + 1, updated_at: nowIso() });
  }

  // ---- definitions ----------------------------------------------------------------------------

  async list(p: Principal, systemKey: string) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    return (await adaptersRepo.list(this.d.db, s.system_key)).map((a) => this.toWire(a));
  }

  async get(p: Principal, systemKey: string, name: string) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    return this.toWire(await this.adapter(this.d.db, s.system_key, name));
  }

  async create(p: Principal, systemKey: string, body: unknown) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    const b = objectBody(body);
    const name = b.name;
    if (typeof name !== "string" || !NAME_RE.test(name)) throw fail("INVALID_ARGUMENT", "name is required: letters, digits, _, - and . (no spaces; not starting with - or .)");
    const now = nowIso();
    const blank = { system_key: s.system_key, name, ...Object.fromEntries(TEXT_FIELDS.map((k) => [k, ""])), ...Object.fromEntries(FLAG_FIELDS.map((k) => [k, 0])), version: 1, created_at: now, updated_at: now } as AdapterRow;
    const row = this.parse(b, blank);
    await this.d.db.tx(async (tx) => {
      if (await adaptersRepo.get(tx, s.system_key, name)) throw fail("ALREADY_EXISTS", `adapter '${name}' already exists`);
      await adaptersRepo.put(tx, row);
      await this.recordChange(tx, s.system_key, name);
    });
    return this.toWire(row);
  }

  /** Partial update; also maps a command to a file: `{command: "start", file: "start.sh"}`. */
  async update(p: Principal, systemKey: string, name: string, body: unknown) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    const b = { ...objectBody(body) };
    return this.d.db.tx(async (tx) => {
      const cur = await this.adapter(tx, s.system_key, name);
      if (b.command !== undefined || b.file !== undefined) {
        const { command, file } = b;
        delete b.command; delete b.file;
        if (typeof command !== "string" || !(CONTROL_COMMANDS as readonly string[]).includes(command) || command === "restart")
          throw fail("INVALID_ARGUMENT", "command must be one of deploy, start, stop, status, undeploy, logs");
        if (typeof file !== "string" || !file) throw fail("INVALID_ARGUMENT", "file (the name of one of the adapter's files) is required with command");
        const f = await adapterFilesRepo.get(tx, s.system_key, name, file);
        if (!f) throw notFound("adapter file", file, "Adaptors");
        b[`${command}_command`] = `./${f.path_name}`;
      }
      if (b.name !== undefined && b.name !== name) throw fail("INVALID_ARGUMENT", "an adapter cannot be renamed");
      const row = this.parse(b, cur);
      await this.bump(tx, row);
      await this.recordChange(tx, s.system_key, name);
      return this.toWire({ ...row, version: cur.version + 1 });
    });
  }

  async remove(p: Principal, systemKey: string, name: string) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    await this.d.db.tx(async (tx) => {
      if (!(await adaptersRepo.delete(tx, s.system_key, name)).changes) throw notFound("adapter", name, "Adaptors");
      await blobsRepo.collect(tx);
      await this.recordChange(tx, s.system_key, name);
    });
    return {};
  }

  // ---- files ----------------------------------------------------------------------------------

  async files(p: Principal, systemKey: string, name: string) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    await this.adapter(this.d.db, s.system_key, name);
    const rows = await adapterFilesRepo.versions(this.d.db, s.system_key, name);
    const newest = new Map<string, number>();
    for (const r of rows) newest.set(r.name, Math.max(newest.get(r.name) ?? 0, r.version));
    return rows.map((r) => ({ ...this.fileToWire(r), current: newest.get(r.name) === r.version }));
  }

  /** A new version of a file from a body: content required for a new file, meta kept from the last version otherwise. */
  private async writeFile(tx: Executor, systemKey: string, adapter: AdapterRow, fileName: string, b: Record<string, unknown>, requireContent: boolean) {
    for (const k of Object.keys(b)) if (!["name", "adaptor_name", "adapter_name", "path_name", "owner", "group", "permissions", "file", "version", "size", "sha256", "created_at", "current"].includes(k))
      throw fail("INVALID_ARGUMENT", `body: unknown field '${k}'`);
    if (!NAME_RE.test(fileName)) throw fail("INVALID_ARGUMENT", `file name '${fileName}' must be letters, digits, _, - and . (no spaces; not starting with - or .)`);
    for (const k of ["adaptor_name", "adapter_name"]) if (b[k] !== undefined && b[k] !== adapter.name) throw fail("INVALID_ARGUMENT", `${k} '${String(b[k])}' differs from the adapter in the path`);
    const prev = await adapterFilesRepo.get(tx, systemKey, adapter.name, fileName);
    const text = (k: string, dflt: string) => {
      const v = b[k];
      if (v === undefined || v === null) return dflt;
      if (typeof v !== "string") throw fail("INVALID_ARGUMENT", `${k} must be a string`);
      return v;
    };
    const pathName = text("path_name", prev?.path_name ?? fileName);
    const safe = safeRelativePath(pathName);
    if (!safe) throw fail("INVALID_ARGUMENT", `path_name '${pathName}' must be a relative path inside the adapter's directory (no '..', not absolute)`);
    const owner = text("owner", prev?.owner ?? ""), group = text("group", prev?.group_name ?? "");
    for (const [k, v] of [["owner", owner], ["group", group]] as const) if (v && !ACCOUNT_RE.test(v)) throw fail("INVALID_ARGUMENT", `${k} '${v}' must be a user or group name, or a number`);
    // "" is what ClearBlade exports for a file whose mode was never set: the default mode, kept as ""
    const permissions = text("permissions", prev?.permissions ?? "0644");
    if (permissions !== "" && permissionBits(permissions) === null) throw fail("INVALID_ARGUMENT", `permissions '${permissions}' must be octal like 0755 or 644, or empty for the default (0644)`);
    let content: Buffer | null = null;
    if (b.file !== undefined && b.file !== null) {
      if (typeof b.file !== "string") throw fail("INVALID_ARGUMENT", "file must be the content as a base64 string");
      content = decodeBase64(b.file);
      if (!content) throw fail("INVALID_ARGUMENT", "file is not valid base64");
      if (content.length > FILE_MAX_BYTES) throw fail("PAYLOAD_TOO_LARGE", `file is larger than ${FILE_MAX_BYTES} bytes`);
    } else if (requireContent || !prev) throw fail("INVALID_ARGUMENT", "file (the content, base64) is required");
    const hash = content ? sha256(content) : prev!.hash;
    if (content) await blobsRepo.put(tx, hash, content);
    const row: AdapterFileRow = {
      system_key: systemKey, adapter_name: adapter.name, name: fileName, version: (prev?.version ?? 0) + 1, path_name: safe,
      owner, group_name: group, permissions, hash,
      size: content ? content.length : prev!.size, created_at: nowIso(),
    };
    await adapterFilesRepo.insert(tx, row);
    await this.bump(tx, adapter);
    await this.recordChange(tx, systemKey, adapter.name);
    return row;
  }

  /** Creates a file or replaces it (a new version). */
  async putFile(p: Principal, systemKey: string, name: string, body: unknown) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    const b = objectBody(body);
    if (typeof b.name !== "string") throw fail("INVALID_ARGUMENT", "name (the file's name) is required");
    const row = await this.d.db.tx(async (tx) => this.writeFile(tx, s.system_key, await this.adapter(tx, s.system_key, name), b.name as string, b, true));
    return this.fileToWire(row);
  }

  async getFile(p: Principal, systemKey: string, name: string, file: string, version?: string | null) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    let v: number | undefined;
    if (version !== undefined && version !== null) {
      v = Number(version);
      if (!Number.isInteger(v) || v < 1) throw fail("INVALID_ARGUMENT", "version must be a whole number >= 1");
    }
    await this.adapter(this.d.db, s.system_key, name);
    const f = await adapterFilesRepo.get(this.d.db, s.system_key, name, file, v);
    if (!f) throw notFound(v === undefined ? "adapter file" : `version ${v} of adapter file`, file, "Adaptors");
    const content = await blobsRepo.get(this.d.db, f.hash);
    if (!content) {
      // the file went (and its content with it) between the two reads
      if (!(await adapterFilesRepo.get(this.d.db, s.system_key, name, file, f.version))) throw notFound("adapter file", file, "Adaptors");
      throw fail("INTERNAL", `adapter '${name}': the content of file '${file}' (version ${f.version}, sha256 ${f.hash}) is missing from the database`);
    }
    return this.fileToWire(f, content);
  }

  /** `{file}` overwrites the content (a new version); answers with the configuration and content. */
  async overwriteFile(p: Principal, systemKey: string, name: string, file: string, body: unknown) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    const b = objectBody(body);
    if (b.file === undefined) throw fail("INVALID_ARGUMENT", "file (the new content, base64) is required");
    if (b.name !== undefined && b.name !== file) throw fail("INVALID_ARGUMENT", "a file cannot be renamed");
    const row = await this.d.db.tx(async (tx) => {
      const a = await this.adapter(tx, s.system_key, name);
      if (!(await adapterFilesRepo.get(tx, s.system_key, name, file))) throw notFound("adapter file", file, "Adaptors");
      return this.writeFile(tx, s.system_key, a, file, b, true);
    });
    return this.fileToWire(row, decodeBase64(b.file as string));
  }

  async deleteFile(p: Principal, systemKey: string, name: string, file: string) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    await this.d.db.tx(async (tx) => {
      const a = await this.adapter(tx, s.system_key, name);
      if (!(await adapterFilesRepo.delete(tx, s.system_key, name, file)).changes) throw notFound("adapter file", file, "Adaptors");
      await blobsRepo.collect(tx);
      await this.bump(tx, a);
      await this.recordChange(tx, s.system_key, name);
    });
    return {};
  }

  // ---- edges ----------------------------------------------------------------------------------

  /** `{command, edges, timeout?}`: the command on each edge, `{edge: {err, command, output}}`. */
  async control(p: Principal, systemKey: string, name: string, body: unknown) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    const b = knownFields(objectBody(body), CONTROL_FIELDS);
    const command = b.command;
    if (typeof command !== "string" || !(CONTROL_COMMANDS as readonly string[]).includes(command))
      throw fail("INVALID_ARGUMENT", `command must be one of ${CONTROL_COMMANDS.join(", ")}`);
    const edges = typeof b.edges === "string" ? [b.edges] : b.edges;
    if (!Array.isArray(edges) || !edges.length || !edges.every((e) => typeof e === "string" && e)) throw fail("INVALID_ARGUMENT", "edges must be a non-empty list of edge names");
    const timeoutS = b.timeout ?? DEFAULT_TIMEOUT_S;
    if (typeof timeoutS !== "number" || !Number.isInteger(timeoutS) || timeoutS < 1 || timeoutS > MAX_TIMEOUT_S) throw fail("INVALID_ARGUMENT", `timeout must be 1 to ${MAX_TIMEOUT_S} seconds`);
    const control = this.edgeControl.get();
    if (!control) throw fail("INVALID_ARGUMENT", "adapters are controlled from the platform, not from an edge");
    const a = await this.adapter(this.d.db, s.system_key, name);
    const req = {
      adapter: a, command: command as ControlCommand, timeoutMs: timeoutS * 1000,
      ...(command === "deploy" ? { files: controlFiles(await adapterBody(this.d.db, a)) } : {}),
    };
    // one answer per edge: an unknown edge is an error in its entry, and the others still run
    const results = await Promise.all([...new Set(edges as string[])].map(async (e) => [e,
      (await edgesRepo.get(this.d.db, s.system_key, e)) ? await control(s.system_key, e, req) : { err: true, command, output: `edge '${e}' does not exist` }] as const));
    return Object.fromEntries(results);
  }

  /** The edges whose template has the adapter (`adapter` given), or every adapter's edges. */
  async edgesOf(p: Principal, systemKey: string, adapter: string | null) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    const names = adapter ? [(await this.adapter(this.d.db, s.system_key, adapter)).name] : (await adaptersRepo.list(this.d.db, s.system_key)).map((a) => a.name);
    const out: Record<string, string[]> = Object.fromEntries(names.map((n) => [n, []]));
    for (const e of await edgesRepo.all(this.d.db, s.system_key)) {
      const template = await this.edges.templateOf(this.d.db, s.system_key, e);
      for (const n of names) if (template.some((t) => t.def_module === "adapter" && (t.def_name === n || t.def_name === "*"))) out[n]!.push(e.name);
    }
    return adapter ? out[adapter]! : out;
  }
}

/** An adapter with its current files and their contents (the sync body, and a deploy's files). */
export async function adapterBody(ex: Executor, a: AdapterRow): Promise<AdapterBody> {
  // files and contents in one read: read apart, a change committed in between (a new version, a
  // content no version refers to any more collected) would pair a file with no content
  const files = [];
  for (const { content, ...f } of await adapterFilesRepo.currentWithContent(ex, a.system_key, a.name)) {
    // an empty file in its place would be deployed without a word
    if (!content) throw fail("INTERNAL", `adapter '${a.name}': the content of file '${f.name}' (version ${f.version}, sha256 ${f.hash}) is missing from the database`);
    files.push({ ...f, content: Buffer.from(content).toString("base64") });
  }
  return { adapter: a, files };
}

/** Why a file as the sync channel carries it cannot be taken (its content is not what its hash
 *  says), or null. */
export function fileContentProblem(adapter: string, f: AdapterBody["files"][number]): string | null {
  const content = decodeBase64(f.content);
  if (!content) return `adapter '${adapter}': file '${f.name}' is not valid base64`;
  if (sha256(content) !== f.hash) return `adapter '${adapter}': the content of file '${f.name}' (version ${f.version}) does not match its sha256 ${f.hash}`;
  return null;
}

/** The files of an adapter as a deploy writes them. */
export const controlFiles = (b: AdapterBody): ControlFile[] =>
  b.files.map((f) => ({ name: f.name, path_name: f.path_name, owner: f.owner, group: f.group_name, permissions: f.permissions, version: f.version, content: f.content }));
