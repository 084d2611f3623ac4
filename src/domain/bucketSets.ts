// Bucket sets (ClearBlade's older file areas): a named set of three boxes, `inbox`, `outbox` and
// `sandbox`, whose files live in the storage the set names for the platform (`platform_storage`,
// `platform_config`) and for edges (`edge_storage`, `edge_config`); a node uses the one of its
// mode. A file is `<box>/<path>` in the set's backend. Developers define sets (no update: ClearBlade
// has none, its CLI deletes and recreates); users and devices reach a set's files by the role
// permission `files` on the set's name (read to list and read, create to write, delete to delete).
// Moving files between an edge and its platform is edge sync's (see the hook below).
import { LEVEL } from "../auth/permissions.ts";
import type { Principal } from "../auth/principal.ts";
import type { SecretBox } from "../auth/secrets.ts";
import type { Port } from "../core/port.ts";
import { fail, notFound } from "../core/errors.ts";
import { nowIso } from "../core/ids.ts";
import { knownFields, objectBody } from "../core/validate.ts";
import { type BucketSetRow, bucketSetsRepo } from "../store/fileAreas.ts";
import { checkPath, type FileBackend, type FileStat } from "../store/files/backend.ts";
import type { DomainDeps } from "./deps.ts";
import { checkAreaName, checkStorageKind, type FileStorage, sealedConfig, shownConfig } from "./fileStorage.ts";
import type { Systems } from "./systems.ts";

export const BOXES = ["inbox", "outbox", "sandbox"] as const;
export type Box = (typeof BOXES)[number];
/** Sets in a system. */
export const MAX_BUCKET_SETS = 1000;
/** Files one listing of a set answers at most (the API has no paging). */
export const MAX_LISTED_FILES = 10_000;

// The fields of each body (ClearBlade's clients send these; a set read back also carries its
// system_key). Anything else is a mistake the caller hears about, not something dropped.
const SET_FIELDS = new Set(["name", "platform_storage", "platform_config", "edge_storage", "edge_config", "system_key"]);
const FILE_FIELDS = new Set(["box", "path", "contents"]);
const DELETE_FIELDS = new Set(["box", "path"]);
const COPY_FIELDS = new Set(["from_box", "from_path", "to_box", "to_path"]);

/** What a file looks like to ClearBlade's clients (cblib FileMeta). */
export interface FileMeta {
  path_name: string; relative_name: string; base_name: string; bucket_name: Box;
  size: number; permissions: string; last_modified: string;
}

/** Puts a file of a set into an edge's inbox; edge sync provides it (until then: not supported).
 *  `path` is `<box>/<path in the box>`; the answer is the transfer's status. */
export interface EdgeFileSender {
  sendToEdge(systemKey: string, set: string, path: string, edge: string): Promise<unknown>;
}

export function checkBox(v: unknown): Box {
  if (typeof v !== "string" || !(BOXES as readonly string[]).includes(v)) throw fail("INVALID_ARGUMENT", `box must be one of ${BOXES.join(", ")}`);
  return v as Box;
}

export function fileMeta(box: Box, st: FileStat): FileMeta {
  const relative = st.path.slice(box.length + 1);
  return {
    path_name: st.path, relative_name: relative, base_name: relative.split("/").at(-1)!, bucket_name: box,
    size: st.size, permissions: "-rw-rw-rw-", last_modified: st.modified.toISOString(),
  };
}

export class BucketSets {
  /** `edgeFiles`: edge sync's sender, attached when a platform's sync side is built (none: not supported) */
  constructor(private readonly d: DomainDeps, private readonly systems: Systems, private readonly storage: FileStorage, private readonly secrets: SecretBox,
    private readonly edgeFiles: Port<EdgeFileSender>) {}

  private toWire(r: BucketSetRow, p: Principal) {
    const reveal = p.kind === "developer";
    return {
      name: r.name, system_key: r.system_key,
      platform_storage: r.platform_storage, platform_config: shownConfig(r.platform_config, reveal, this.secrets),
      edge_storage: r.edge_storage, edge_config: shownConfig(r.edge_config, reveal, this.secrets),
      created_at: r.created_at,
    };
  }

  private async mustGet(systemKey: string, name: string): Promise<BucketSetRow> {
    const r = await bucketSetsRepo.get(this.d.db, systemKey, name);
    if (!r) throw notFound("bucket set", name);
    return r;
  }

  /** The backend of a set on this node (the platform's storage, or the edge's on an edge). */
  backendOf(r: BucketSetRow): FileBackend {
    const edge = this.d.config.mode === "edge";
    return this.storage.backend(r.system_key, "bucket_sets", r.name, edge ? r.edge_storage : r.platform_storage, edge ? r.edge_config : r.platform_config);
  }

  /** A set the caller may act on at `level`, and its backend. */
  async open(p: Principal, systemKey: string, name: string, level: number): Promise<{ set: BucketSetRow; files: FileBackend }> {
    const s = await this.systems.access(p, systemKey);
    await this.d.perms.require(p, { kind: "item", itemKind: "files", name }, level, `the files of bucket set '${name}'`);
    const set = await this.mustGet(s.system_key, name);
    return { set, files: this.backendOf(set) };
  }

  async list(p: Principal, systemKey: string) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    return (await bucketSetsRepo.list(this.d.db, s.system_key)).map((r) => this.toWire(r, p));
  }

  async get(p: Principal, systemKey: string, name: string) {
    const { set } = await this.open(p, systemKey, name, LEVEL.READ);
    return this.toWire(set, p);
  }

  async create(p: Principal, systemKey: string, body: unknown) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    const b = knownFields(objectBody(body), SET_FIELDS);
    if (b.system_key !== undefined && b.system_key !== s.system_key) throw fail("INVALID_ARGUMENT", "system_key, when sent, must be the path's system key");
    const name = checkAreaName(b.name, "bucket set");
    const platformKind = checkStorageKind(b.platform_storage, "platform_storage");
    const edgeKind = checkStorageKind(b.edge_storage, "edge_storage");
    const row: BucketSetRow = {
      system_key: s.system_key, name,
      platform_storage: platformKind, platform_config: sealedConfig(platformKind, b.platform_config, "platform_config", this.secrets),
      edge_storage: edgeKind, edge_config: sealedConfig(edgeKind, b.edge_config, "edge_config", this.secrets),
      created_at: nowIso(),
    };
    await this.d.db.tx(async (tx) => {
      if (await bucketSetsRepo.get(tx, s.system_key, name)) throw fail("ALREADY_EXISTS", `bucket set '${name}' already exists`);
      if ((await bucketSetsRepo.count(tx, s.system_key)) >= MAX_BUCKET_SETS) throw fail("INVALID_ARGUMENT", `a system has at most ${MAX_BUCKET_SETS} bucket sets`);
      await bucketSetsRepo.insert(tx, row);
      await this.d.changes.record(tx, s.system_key, "bucketset", name, "upsert", row);
    });
    return this.toWire(row, p);
  }

  /** Deletes the set and, on local storage, its files; files in S3 stay (the bucket is the operator's). */
  async remove(p: Principal, systemKey: string, name: string) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    const set = await this.mustGet(s.system_key, name);
    await this.d.db.tx(async (tx) => {
      await bucketSetsRepo.delete(tx, s.system_key, name);
      await this.d.changes.record(tx, s.system_key, "bucketset", name, "delete", { name });
    });
    await this.storage.removeArea(s.system_key, "bucket_sets", name, this.d.config.mode === "edge" ? set.edge_storage : set.platform_storage);
    return {};
  }

  // ---- files ----------------------------------------------------------------------------------

  /** Every file of a box ('' or missing: of all boxes), keyed by path_name. */
  async files(p: Principal, systemKey: string, name: string, box: string | null) {
    const { files } = await this.open(p, systemKey, name, LEVEL.READ);
    const boxes = box ? [checkBox(box)] : BOXES;
    const out: Record<string, FileMeta> = {};
    let n = 0;
    for (const b of boxes) {
      let continuation = "";
      do {
        const page = await files.list({ prefix: b, depth: -1, limit: 1000, continuation });
        for (const e of page.entries) {
          if (e.isDir) continue;
          if (++n > MAX_LISTED_FILES) throw fail("INVALID_ARGUMENT", `the set holds over ${MAX_LISTED_FILES} files: list one box, or use ClearBladeAsync.FS from code`);
          out[e.path] = fileMeta(b, e);
        }
        continuation = page.continuation;
      } while (continuation);
    }
    return out;
  }

  private static key(box: unknown, path: unknown, what = "path"): { box: Box; key: string } {
    const b = checkBox(box);
    return { box: b, key: `${b}/${checkPath(path, what)}` };
  }

  async meta(p: Principal, systemKey: string, name: string, box: unknown, path: unknown): Promise<FileMeta> {
    const { files } = await this.open(p, systemKey, name, LEVEL.READ);
    const f = BucketSets.key(box, path);
    const st = await files.stat(f.key);
    if (!st || st.isDir) throw notFound("file", `${f.key}`);
    return fileMeta(f.box, st);
  }

  /** The file's bytes. */
  async read(p: Principal, systemKey: string, name: string, box: unknown, path: unknown): Promise<Uint8Array> {
    const { files } = await this.open(p, systemKey, name, LEVEL.READ);
    return files.get(BucketSets.key(box, path).key);
  }

  /** POST …/file/create {box, path, contents (base64)}. */
  async createFile(p: Principal, systemKey: string, name: string, body: unknown): Promise<FileMeta> {
    const { files } = await this.open(p, systemKey, name, LEVEL.CREATE);
    const b = knownFields(objectBody(body), FILE_FIELDS);
    const f = BucketSets.key(b.box, b.path);
    const c = b.contents ?? "";
    if (typeof c !== "string" || !/^[A-Za-z0-9+/\r\n]*={0,2}\s*$/.test(c)) throw fail("INVALID_ARGUMENT", "contents must be the file's bytes as base64 text");
    const bytes = Buffer.from(c, "base64");
    const meta = fileMeta(f.box, await files.put(f.key, bytes, { maxBytes: this.storage.maxFileBytes }));
    this.changed(systemKey, name, f.key, false);
    return meta;
  }

  /** POST …/file/copy and …/file/move {from_box, from_path, to_box, to_path}. */
  async copyFile(p: Principal, systemKey: string, name: string, body: unknown, move: boolean) {
    const { files } = await this.open(p, systemKey, name, move ? LEVEL.READ | LEVEL.CREATE | LEVEL.DELETE : LEVEL.READ | LEVEL.CREATE);
    const b = knownFields(objectBody(body), COPY_FIELDS);
    const from = BucketSets.key(b.from_box, b.from_path, "from_path"), to = BucketSets.key(b.to_box, b.to_path, "to_path");
    if (move) await files.move(from.key, to.key);
    else await files.copy(from.key, to.key);
    if (move) this.changed(systemKey, name, from.key, true);
    this.changed(systemKey, name, to.key, false);
    return {};
  }

  /** POST …/file/delete {box, path}. */
  async deleteFile(p: Principal, systemKey: string, name: string, body: unknown) {
    const { files } = await this.open(p, systemKey, name, LEVEL.DELETE);
    const b = knownFields(objectBody(body), DELETE_FIELDS);
    const f = BucketSets.key(b.box, b.path);
    if (!(await files.delete(f.key))) throw notFound("file", f.key);
    this.changed(systemKey, name, f.key, true);
    return {};
  }

  /** Says a file of a set was written or deleted (edge sync sends an edge's outbox up). */
  changed(systemKey: string, set: string, path: string, deleted: boolean) {
    void this.d.signals.emit("bucketSet.fileChanged", { systemKey, set, path, deleted });
  }

  /** A path from code (ClearBladeAsync.FS): '<box>/<path in the box>', or a box alone. */
  fsPath(v: unknown): string {
    const path = checkPath(v);
    checkBox(path.split("/")[0]);
    return path;
  }

  /** A set's file to an edge's inbox (ClearBladeAsync.FS(set).syncFileToEdge). */
  async sendToEdge(p: Principal, systemKey: string, name: string, path: string, edge: string) {
    await this.open(p, systemKey, name, LEVEL.READ);
    const sender = this.edgeFiles.get();
    if (!sender) throw fail("INVALID_ARGUMENT", "syncFileToEdge is not yet supported by this node");
    return sender.sendToEdge(systemKey, name, path, edge);
  }
}
