// File bytes in S3-compatible object storage (AWS S3, MinIO, R2, ...), through Bun's built-in S3
// client. One backend is a key prefix in a bucket (`root`), so many bucket sets and file stores
// can share a bucket. Directories are implied by keys ('a/b' makes 'a'); a zero-byte key ending in
// '/' (the folder marker other tools leave) counts as a directory. Bun's client has no server-side
// copy: a copy streams the object through this process. A streamed put is a multipart upload,
// completed only when the whole body arrived, so a refused or broken one leaves the old object.
import { fail } from "../../core/errors.ts";
import {
  checkListOptions, checkPath, compareKeys, continuationAfter, dirPrefix, type FileBackend, type FileBody, type FileStat,
  limited, type ListOptions, type ListPage, missing, type PutOptions, skipAfter, sortKey, tooLarge,
} from "./backend.ts";

export interface S3Config {
  endpoint: string;
  bucket: string;
  region?: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** the key prefix this backend lives under ('' the whole bucket) */
  root?: string;
}

const PART_SIZE = 8 * 1024 * 1024;

const isMissing = (e: unknown) => (e as { code?: string } | undefined)?.code === "NoSuchKey" || (e as { code?: string } | undefined)?.code === "NotFound";

/** A failure of the storage service as an API error: the service said no, or could not be reached. */
function s3Failure(e: unknown, what: string): unknown {
  if (e instanceof Error && (e.name === "S3Error" || /ECONNREFUSED|ConnectionRefused|fetch failed|Unable to connect/i.test(`${(e as { code?: string }).code} ${e.message}`)))
    return fail("INTERNAL", `object storage: ${what}: ${e.message}`);
  return e;
}

export class S3Files implements FileBackend {
  readonly kind = "s3" as const;
  private readonly client: Bun.S3Client;
  private readonly root: string;

  constructor(cfg: S3Config) {
    this.client = new Bun.S3Client({
      endpoint: cfg.endpoint, bucket: cfg.bucket, region: cfg.region || "us-east-1",
      accessKeyId: cfg.accessKeyId, secretAccessKey: cfg.secretAccessKey,
    });
    this.root = cfg.root ? dirPrefix(cfg.root, "root") : "";
  }

  private key(path: string, what = "path") { return this.root + checkPath(path, what); }

  private async sizeOf(path: string): Promise<number> {
    try { return (await this.client.stat(this.key(path))).size; } catch (e) { if (isMissing(e)) throw missing(path); throw s3Failure(e, path); }
  }

  async put(path: string, body: FileBody, opts: PutOptions = {}): Promise<FileStat> {
    const key = this.key(path);
    let over = false;
    const data = limited(body, opts.maxBytes, () => { over = true; });
    try {
      if (data instanceof Uint8Array) await this.client.write(key, data);
      else await this.client.write(key, new Response(data), { partSize: PART_SIZE });
    } catch (e) {
      if (over) throw tooLarge(opts.maxBytes!);
      throw s3Failure(e, path);
    }
    return (await this.stat(path))!;
  }

  async get(path: string, range?: { start: number; end?: number }): Promise<Uint8Array> {
    const key = this.key(path);
    try {
      if (!range) return await this.client.file(key).bytes();
      const size = await this.sizeOf(path);
      const end = Math.min(range.end ?? size, size);
      if (range.start >= end) return new Uint8Array(0);
      return await this.client.file(key).slice(range.start, end).bytes();
    } catch (e) {
      if (isMissing(e)) throw missing(path);
      throw s3Failure(e, path);
    }
  }

  async stream(path: string, start = 0): Promise<ReadableStream<Uint8Array>> {
    const size = await this.sizeOf(path);
    const file = this.client.file(this.key(path));
    if (start >= size) return new Response(new Uint8Array(0)).body!;
    return (start ? file.slice(start) : file).stream();
  }

  async stat(path: string): Promise<FileStat | null> {
    const key = this.key(path);
    try {
      const st = await this.client.stat(key);
      return { path, size: st.size, modified: st.lastModified, isDir: false };
    } catch (e) {
      if (!isMissing(e)) throw s3Failure(e, path);
    }
    const under = await this.client.list({ prefix: `${key}/`, maxKeys: 1 }).catch((e) => { throw s3Failure(e, path); });
    const first = under.contents?.[0];
    return first ? { path, size: 0, modified: first.lastModified ? new Date(first.lastModified) : new Date(0), isDir: true } : null;
  }

  /** Every key under the prefix, read page by page through the service's own continuation. */
  private async keysUnder(prefix: string): Promise<{ key: string; size: number; modified: Date }[]> {
    const out: { key: string; size: number; modified: Date }[] = [];
    let token: string | undefined;
    do {
      const page = await this.client.list({ prefix: this.root + prefix, maxKeys: 1000, ...(token ? { continuationToken: token } : {}) })
        .catch((e) => { throw s3Failure(e, prefix || "/"); });
      for (const o of page.contents ?? [])
        out.push({ key: o.key.slice(this.root.length), size: o.size ?? 0, modified: o.lastModified ? new Date(o.lastModified) : new Date(0) });
      token = page.isTruncated ? page.nextContinuationToken : undefined;
    } while (token);
    return out;
  }

  // A page is cut from all the keys under the prefix, sorted here: servers differ in how they
  // order keys and honour start-after and delimiters (s3rver lists in directory order), and this
  // gives one answer on all of them, at the cost of reading every key under the prefix per page.
  async list(opts?: ListOptions): Promise<ListPage> {
    const { prefix, depth, limit, after } = checkListOptions(opts);
    const byKey = new Map<string, FileStat>();
    for (const o of await this.keysUnder(prefix)) {
      const segs = o.key.slice(prefix.length).split("/");
      if (segs.some((s, i) => s === "" && i < segs.length - 1)) continue; // not a key this API makes
      // the directories on the way to the key, then the key itself (a folder marker is only a directory)
      for (let i = 1; i < segs.length && i <= depth; i++) {
        const dir = prefix + segs.slice(0, i).join("/");
        if (!byKey.has(`${dir}/`)) byKey.set(`${dir}/`, { path: dir, size: 0, modified: o.modified, isDir: true });
      }
      if (segs.at(-1) !== "" && segs.length <= depth) byKey.set(o.key, { path: o.key, size: o.size, modified: o.modified, isDir: false });
    }
    const sorted = [...byKey.entries()].filter(([k]) => !skipAfter(k, after, prefix, depth)).sort(([a], [b]) => compareKeys(a, b));
    const shown = sorted.slice(0, limit).map(([, e]) => e);
    return { entries: shown, continuation: sorted.length > limit ? continuationAfter(sortKey(shown.at(-1)!)) : "" };
  }

  async copy(from: string, to: string): Promise<void> {
    const src = this.key(from), dst = this.key(to, "destination");
    await this.sizeOf(from);
    try { await this.client.write(dst, this.client.file(src)); } catch (e) {
      if (isMissing(e)) throw missing(from);
      throw s3Failure(e, to);
    }
  }

  async move(from: string, to: string): Promise<void> {
    if (this.key(from) === this.key(to, "destination")) { await this.sizeOf(from); return; }
    await this.copy(from, to);
    await this.client.delete(this.key(from)).catch((e) => { throw s3Failure(e, from); });
  }

  async delete(path: string): Promise<boolean> {
    const key = this.key(path);
    try { await this.client.stat(key); } catch (e) { if (isMissing(e)) return false; throw s3Failure(e, path); }
    await this.client.delete(key).catch((e) => { throw s3Failure(e, path); });
    return true;
  }

  async deleteAll(prefix: string): Promise<number> {
    const p = this.root + dirPrefix(prefix);
    let n = 0;
    for (;;) {
      // each round lists what is left: deleting while paging would skip keys
      const page = await this.client.list({ prefix: p, maxKeys: 1000 }).catch((e) => { throw s3Failure(e, prefix || "/"); });
      const keys = (page.contents ?? []).map((o) => o.key);
      if (!keys.length) return n;
      for (const k of keys) {
        await this.client.delete(k).catch((e) => { throw s3Failure(e, k); });
        if (!k.endsWith("/")) n++;
      }
    }
  }
}
