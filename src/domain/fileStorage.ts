// Where a bucket set's or a file store's files live: a storage kind with its settings, checked,
// kept with credentials sealed, shown without them to those who may not see them, and opened as a
// file backend (src/store/files/). Local storage lives under --files-dir (default
// <data-dir>/files), one directory per system and area: a request never names a directory of the
// machine. S3 storage is a bucket (and optionally a key prefix in it) of any S3-compatible service.
import { rm } from "node:fs/promises";
import { join } from "node:path";
import type { SecretBox } from "../auth/secrets.ts";
import type { Config } from "../config.ts";
import { fail } from "../core/errors.ts";
import type { FileBackend } from "../store/files/backend.ts";
import { LocalFiles } from "../store/files/local.ts";
import { S3Files } from "../store/files/s3.ts";

export type StorageKind = "local" | "s3";
/** Which area of a system a backend serves. */
export type FileArea = "bucket_sets" | "filestores";

/** Settings of each kind: local has none; s3 names its service, bucket and credentials. */
const S3_FIELDS = ["endpoint", "bucket", "region", "access_key_id", "secret_access_key", "prefix"] as const;
const SECRET_FIELD = "secret_access_key";
const MAX_FIELD = 2048;

/** Kinds ClearBlade has that Outpost does not serve: refused by name, not as unknown. */
const UNSUPPORTED: Record<string, string> = {
  gcp_bucket: "Google Cloud Storage", google: "Google Cloud Storage", gcs: "Google Cloud Storage",
  sftp: "SFTP", network: "network shares",
};

/** The storage kind, from what a client sent ('' or missing: local). */
export function checkStorageKind(v: unknown, what: string): StorageKind {
  if (v === undefined || v === null || v === "") return "local";
  if (typeof v !== "string") throw fail("INVALID_ARGUMENT", `${what} must be a string: local or s3`);
  const k = v.toLowerCase();
  if (k === "local" || k === "filesystem") return "local";
  if (k === "s3") return "s3";
  if (UNSUPPORTED[k]) throw fail("INVALID_ARGUMENT", `${what} '${v}': ${UNSUPPORTED[k]} storage is not supported by Outpost (local or s3)`);
  throw fail("INVALID_ARGUMENT", `${what} '${v}' is not a storage kind (local or s3)`);
}

/** The settings as kept: checked for the kind, the secret sealed. `previous` (JSON text as kept)
 *  gives the secret when a client sends the settings back without it. */
export function sealedConfig(kind: StorageKind, v: unknown, what: string, secrets: SecretBox): string {
  if (typeof v === "string" && v.trim()) {
    try { v = JSON.parse(v); } catch { throw fail("INVALID_ARGUMENT", `${what} must be an object, or JSON text of one`); }
  }
  if (v === undefined || v === null || v === "") v = {};
  if (typeof v !== "object" || Array.isArray(v)) throw fail("INVALID_ARGUMENT", `${what} must be an object`);
  const given = v as Record<string, unknown>;
  if (kind === "local") {
    // (a local area's place is --files-dir: no client chooses a directory of the machine)
    for (const k of ["root", "directory", "path", "dir"]) if (given[k] !== undefined && given[k] !== "")
      throw fail("INVALID_ARGUMENT", `${what}.${k}: local storage lives in the server's files directory; a request cannot choose one`);
    return "{}";
  }
  const out: Record<string, string> = {};
  for (const k of Object.keys(given)) if (!(S3_FIELDS as readonly string[]).includes(k)) throw fail("INVALID_ARGUMENT", `${what}.${k}: not an s3 setting (${S3_FIELDS.join(", ")})`);
  for (const k of S3_FIELDS) {
    const f = given[k];
    if (f === undefined || f === null || f === "") continue;
    if (typeof f !== "string" || f.length > MAX_FIELD) throw fail("INVALID_ARGUMENT", `${what}.${k} must be a string of up to ${MAX_FIELD} characters`);
    out[k] = f;
  }
  for (const k of ["endpoint", "bucket", "access_key_id", SECRET_FIELD] as const) if (!out[k]) throw fail("INVALID_ARGUMENT", `${what}.${k} is required for s3 storage`);
  let url: URL;
  try { url = new URL(out.endpoint!); } catch { throw fail("INVALID_ARGUMENT", `${what}.endpoint must be a URL (http:// or https://)`); }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw fail("INVALID_ARGUMENT", `${what}.endpoint must be http:// or https://`);
  if (out.prefix) out.prefix = out.prefix.replace(/^\/+|\/+$/g, "");
  out[SECRET_FIELD] = secrets.seal(out[SECRET_FIELD]!);
  return JSON.stringify(out);
}

/** The settings for an answer: with the secret for those who may see it, else without. */
export function shownConfig(kept: string, reveal: boolean, secrets: SecretBox): Record<string, unknown> {
  const c = JSON.parse(kept) as Record<string, string>;
  if (c[SECRET_FIELD] === undefined) return c;
  if (!reveal) { const { [SECRET_FIELD]: _, ...rest } = c; return rest; }
  return { ...c, [SECRET_FIELD]: secrets.open(c[SECRET_FIELD]) };
}

/** Settings as they travel to an edge on its sync link (its authenticated channel): the secret
 *  opened, for the edge to seal with its own key (each node seals with its own). A secret this node
 *  cannot open is left out: the edge's storage then answers that its credentials are refused. */
export function travellingConfig(kept: string, secrets: SecretBox): string {
  const c = JSON.parse(kept) as Record<string, string>;
  if (c[SECRET_FIELD] === undefined) return kept;
  try { return JSON.stringify({ ...c, [SECRET_FIELD]: secrets.open(c[SECRET_FIELD]) }); }
  catch { const { [SECRET_FIELD]: _, ...rest } = c; return JSON.stringify(rest); }
}

/** Settings that travelled (see travellingConfig), as this node keeps them: the secret sealed. */
export function arrivedConfig(travelling: string, secrets: SecretBox): string {
  const c = JSON.parse(travelling) as Record<string, string>;
  if (typeof c[SECRET_FIELD] !== "string") return travelling;
  return JSON.stringify({ ...c, [SECRET_FIELD]: secrets.seal(c[SECRET_FIELD]) });
}

/** Opens backends for areas, one per area (kept while its settings stay the same). */
export class FileStorage {
  private readonly open = new Map<string, { kept: string; backend: FileBackend }>();
  readonly root: string;
  /** the largest file one write may store */
  readonly maxFileBytes: number;

  constructor(config: Config, private readonly secrets: SecretBox) {
    this.root = config.filesDir ?? join(config.dataDir, "files");
    this.maxFileBytes = config.maxFileMb * 1024 * 1024;
  }

  /** Where a system's local areas live. */
  systemDir(systemKey: string) { return join(this.root, encodeURIComponent(systemKey)); }

  backend(systemKey: string, area: FileArea, name: string, kind: string, kept: string): FileBackend {
    const id = `${systemKey}\n${area}\n${name}`;
    const had = this.open.get(id);
    if (had && had.kept === `${kind}\n${kept}`) return had.backend;
    let backend: FileBackend;
    if (kind === "s3") {
      const c = JSON.parse(kept) as Record<string, string>;
      backend = new S3Files({
        endpoint: c.endpoint!, bucket: c.bucket!, region: c.region, accessKeyId: c.access_key_id!,
        secretAccessKey: this.secrets.open(c[SECRET_FIELD]!), root: c.prefix ?? "",
      });
    } else backend = new LocalFiles(this.areaDir(systemKey, area, name));
    this.open.set(id, { kept: `${kind}\n${kept}`, backend });
    return backend;
  }

  /** A deleted system's local files, all areas (files in S3 stay: the buckets are the operator's). */
  async removeSystem(systemKey: string) {
    this.forget(systemKey);
    await rm(this.systemDir(systemKey), { recursive: true, force: true });
  }

  /** A deleted area's files: on local storage removed with their directory; in S3 they stay. */
  async removeArea(systemKey: string, area: FileArea, name: string, kind: string) {
    this.forget(systemKey, area, name);
    if (kind === "local") await rm(this.areaDir(systemKey, area, name), { recursive: true, force: true });
  }

  private areaDir(systemKey: string, area: FileArea, name: string) { return join(this.systemDir(systemKey), area, encodeURIComponent(name)); }

  /** Forgets an area's backend (deleted, or its system gone). */
  forget(systemKey: string, area?: FileArea, name?: string) {
    for (const id of [...this.open.keys()]) {
      const [s, a, n] = id.split("\n");
      if (s === systemKey && (!area || a === area) && (name === undefined || n === name)) this.open.delete(id);
    }
  }
}

/** A set's or store's name: 1 to 128 characters, no '/', no control characters, not '.' or '..'. */
export function checkAreaName(v: unknown, what: string): string {
  if (typeof v !== "string" || !v.length || v.length > 128) throw fail("INVALID_ARGUMENT", `${what} name must be a string of 1 to 128 characters`);
  if (/[\u0000-\u001f\u007f/\\]/.test(v) || v === "." || v === "..") throw fail("INVALID_ARGUMENT", `${what} name may not hold '/', '\\' or control characters, nor be '.' or '..'`);
  return v;
}
