// Where file bytes live: one interface for every backend (a local directory, S3-compatible object
// storage), so bucket sets, file stores, the code runtime and edge sync never know which one holds
// a file. A path is a key relative to the backend's root: '/'-separated segments, never '.' or
// '..', no empty segment, no control characters; a path that is not one is refused before any
// backend sees it. Directories are implied by the files under them (as in object storage): a
// directory exists while a file is in it, and listing shows it as an entry with isDir.
import { fail, notFound } from "../../core/errors.ts";

export interface FileStat {
  /** the path relative to the backend's root (a directory's without a trailing '/') */
  path: string;
  size: number;
  modified: Date;
  isDir: boolean;
}

export interface ListOptions {
  /** a directory to list under ('' the root); a trailing '/' is optional */
  prefix?: string;
  /** how many levels below the prefix: 1 (the default) its direct entries, -1 unlimited */
  depth?: number;
  /** entries per page (default 100) */
  limit?: number;
  /** the token a previous page returned */
  continuation?: string;
}

export interface ListPage {
  /** in key order (UTF-8 bytes; a directory sorts as its path with a trailing '/') */
  entries: FileStat[];
  /** '' when there is no further page */
  continuation: string;
}

/** Bytes to store: whole, or streamed (never held in memory whole by the backend). */
export type FileBody = Uint8Array | string | ReadableStream<Uint8Array>;

export interface PutOptions {
  /** refuse (413) a body longer than this, leaving any previous file as it was */
  maxBytes?: number;
}

export interface FileBackend {
  readonly kind: "local" | "s3";
  /** Writes a file whole (replacing any), creating its directories; a reader sees the old or the new file, never a part. */
  put(path: string, body: FileBody, opts?: PutOptions): Promise<FileStat>;
  /** The file's bytes, or the bytes [start, end) of it (end past the size reads to the end). NOT_FOUND if missing. */
  get(path: string, range?: { start: number; end?: number }): Promise<Uint8Array>;
  /** The file's bytes as a stream (from `start` when given). NOT_FOUND if missing. */
  stream(path: string, start?: number): Promise<ReadableStream<Uint8Array>>;
  /** The file or directory, or null. */
  stat(path: string): Promise<FileStat | null>;
  list(opts?: ListOptions): Promise<ListPage>;
  /** Copies a file (replacing the destination). NOT_FOUND if the source is missing. */
  copy(from: string, to: string): Promise<void>;
  /** Moves a file (replacing the destination). NOT_FOUND if the source is missing. */
  move(from: string, to: string): Promise<void>;
  /** Deletes a file; false if there was none. */
  delete(path: string): Promise<boolean>;
  /** Deletes every file under a directory ('' everything); returns how many. */
  deleteAll(prefix: string): Promise<number>;
  /** Optional fast paths for a file of this machine (edge sync's copies and parts; absent: they
   *  go through stream and put). adopt moves `localFile` into place as `path` (gone from where it
   *  was); linkOut makes `localFile` a link to the file as it is now (a later write of the path
   *  makes a new file, so the link keeps this version). Either may refuse (another filesystem):
   *  false, and nothing changed. */
  adopt?(path: string, localFile: string): Promise<boolean>;
  linkOut?(path: string, localFile: string): Promise<boolean>;
}

export const DEFAULT_LIST_LIMIT = 100;
export const MAX_LIST_LIMIT = 10_000;
const MAX_PATH_BYTES = 1024;

/** The path as a key, or INVALID_ARGUMENT saying why it is not one. Leading and repeated '/' are
 *  not accepted: a path is relative, and '..' never climbs out of the root. */
export function checkPath(path: unknown, what = "path"): string {
  if (typeof path !== "string" || !path.length) throw fail("INVALID_ARGUMENT", `${what} must be a non-empty string`);
  if (Buffer.byteLength(path) > MAX_PATH_BYTES) throw fail("INVALID_ARGUMENT", `${what} is over ${MAX_PATH_BYTES} bytes`);
  if (/[\u0000-\u001f\u007f\\]/.test(path)) throw fail("INVALID_ARGUMENT", `${what} may not hold control characters or '\\'`);
  if (path.startsWith("/")) throw fail("INVALID_ARGUMENT", `${what} must be relative (no leading '/')`);
  for (const seg of path.split("/"))
    if (seg === "" || seg === "." || seg === "..") throw fail("INVALID_ARGUMENT", `${what} '${path}' has an empty, '.' or '..' segment`);
  return path;
}

/** A directory prefix as a key prefix: '' for the root, else the checked path and '/'. */
export function dirPrefix(prefix: string | undefined, what = "prefix"): string {
  const p = (prefix ?? "").replace(/\/+$/, "");
  return p === "" ? "" : `${checkPath(p, what)}/`;
}

export function checkListOptions(opts: ListOptions = {}): { prefix: string; depth: number; limit: number; after: string } {
  const depth = opts.depth ?? 1;
  if (!Number.isInteger(depth) || (depth < 1 && depth !== -1)) throw fail("INVALID_ARGUMENT", "depth must be a positive integer, or -1 for unlimited");
  const limit = opts.limit ?? DEFAULT_LIST_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) throw fail("INVALID_ARGUMENT", `limit must be an integer from 1 to ${MAX_LIST_LIMIT}`);
  const prefix = dirPrefix(opts.prefix);
  let after = "";
  if (opts.continuation) {
    after = Buffer.from(opts.continuation, "base64url").toString();
    if (!after.startsWith(prefix) || Buffer.from(after).toString("base64url") !== opts.continuation) throw fail("INVALID_ARGUMENT", "continuation_token is not one this listing gave");
  }
  return { prefix, depth: depth === -1 ? Number.POSITIVE_INFINITY : depth, limit, after };
}

/** The token that continues a listing after the entry with this sort key. */
export const continuationAfter = (sortKey: string) => Buffer.from(sortKey).toString("base64url");

/** An entry's sort key: its path, and '/' after a directory's. */
export const sortKey = (e: FileStat) => (e.isDir ? `${e.path}/` : e.path);

/** Byte order of the UTF-8 encodings, as object storage lists keys. */
export const compareKeys = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

/** True when `key` lies strictly inside the directory `dir` (a sort key ending in '/'). */
export const isInside = (key: string, dir: string) => dir.endsWith("/") && key.length > dir.length && key.startsWith(dir);

/** How deep a key lies below the prefix (1: directly in it). */
export const depthBelow = (key: string, prefix: string) => key.slice(prefix.length).replace(/\/$/, "").split("/").length;

/** The continuation state after `after`: keys to skip are those at or before it, and those inside
 *  it when it is a directory at the depth limit (its content was not listed). */
export function skipAfter(key: string, after: string, prefix: string, depth: number): boolean {
  if (!after) return false;
  if (compareKeys(key, after) <= 0) return true;
  return after.endsWith("/") && depthBelow(after, prefix) >= depth && isInside(key, after);
}

export const missing = (path: string) => notFound("file", path);

/** A stream that fails with PAYLOAD_TOO_LARGE once more than `max` bytes have passed through it. */
export function limited(body: FileBody, max: number | undefined, onOver?: () => void): ReadableStream<Uint8Array> | Uint8Array {
  if (typeof body === "string") body = new TextEncoder().encode(body);
  if (body instanceof Uint8Array) {
    if (max !== undefined && body.byteLength > max) throw tooLarge(max);
    return body;
  }
  if (max === undefined) return body;
  let seen = 0;
  return body.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, ctl) {
      seen += chunk.byteLength;
      if (seen > max) { onOver?.(); ctl.error(tooLarge(max)); }
      else ctl.enqueue(chunk);
    },
  }));
}

export const tooLarge = (max: number) => fail("PAYLOAD_TOO_LARGE", `the file is over the limit of ${max} bytes`);
