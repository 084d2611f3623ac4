// File stores, black-box: /api/v/1/filestore/{systemKey}[/{name}] (create, list and get with
// decrypt, DELETE ?name=), a store's files as raw bytes (GET, PUT, DELETE .../file/{path}), listing
// with depth and continuation, copy and move; local storage and S3 (an s3rver started here); the
// read and write auth methods; failure paths (bad bodies, unsupported kinds and methods, traversal,
// other systems, missing rights, a body over --max-file-mb).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import S3rver from "s3rver";
import t, { type Test } from "tap";
import { Client, type DevSystem, type Outpost, devWithSystem, isErr, must, newUser, ok200, request, startOutpost, uniq } from "./harness.ts";

// error codes of src/core/errors.ts
const E = { INVALID_ARGUMENT: 111, PAYLOAD_TOO_LARGE: 112, PERMISSION_DENIED: 200, NOT_AUTHORIZED_FOR_SYSTEM: 201, AUTH_REQUIRED: 202, BAD_CREDENTIALS: 203, DEVELOPER_ONLY: 205, ALREADY_EXISTS: 207, NOT_FOUND: 208 } as const;

let o: Outpost;
let s: DevSystem;
let other: DevSystem;
const s3dir = mkdtempSync(join(tmpdir(), "outpost-e2e-s3-"));
const s3 = new S3rver({ port: 0, address: "127.0.0.1", silent: true, directory: s3dir, configureBuckets: [{ name: "stores", configs: [] }] });
let s3endpoint = "";

t.before(async () => {
  s3endpoint = `http://127.0.0.1:${(await s3.run()).port}`;
  o = await startOutpost({ args: ["--max-file-mb", "1"] });
  s = await devWithSystem(o, "stores");
  other = await devWithSystem(o, "other");
});
t.teardown(async () => { await o?.stop(); await s3.close(); rmSync(s3dir, { recursive: true, force: true }); });

const storesPath = (sys: DevSystem) => `/api/v/1/filestore/${sys.systemKey}`;
const filePath = (sys: DevSystem, store: string, path: string) => `/api/v/1/filestore/${sys.systemKey}/${store}/file/${path}`;
const s3config = (prefix: string) => ({ endpoint: s3endpoint, bucket: "stores", access_key_id: "S3RVER", secret_access_key: "S3RVER", prefix });

async function newStore(extra: Record<string, unknown> = {}, sys: DevSystem = s) {
  const name = uniq("store");
  await must(sys.dev.post(storesPath(sys), { name, storage_type: "local", read_auth_method: "clearblade_auth", write_auth_method: "clearblade_auth", ...extra }), "create store");
  return name;
}

/** Raw bytes up; the answer. */
const putBytes = (c: Client, path: string, bytes: Buffer, headers: Record<string, string> = {}) =>
  request(c.base, "PUT", path, { headers: { ...c.headers, "Content-Type": "application/octet-stream", ...headers }, body: bytes });

async function filesAndListing(t: Test, store: string) {
  const bytes = Buffer.from(Array.from({ length: 3000 }, (_, i) => i % 256));
  ok200(t, await putBytes(s.dev, filePath(s, store, "dir/sub/data.bin"), bytes), "put raw bytes");
  const got = await new Promise<{ status: number; type: string; body: Buffer }>((res, rej) => {
    fetch(`${o.url}${filePath(s, store, "dir/sub/data.bin")}`, { headers: s.dev.headers }).then(async (r) => res({ status: r.status, type: r.headers.get("content-type") ?? "", body: Buffer.from(await r.arrayBuffer()) }), rej);
  });
  t.equal(got.status, 200);
  t.match(got.type, /application\/octet-stream/, "served as octets");
  t.ok(got.body.equals(bytes), "the bytes come back as sent");
  for (const p of ["a.txt", "b.txt", "dir/c.txt", "dir/sub/d.txt"]) ok200(t, await putBytes(s.dev, filePath(s, store, p), Buffer.from(p)), `put ${p}`);
  const top = await must(s.dev.get(`/api/v/1/filestore/${s.systemKey}/${store}/list/`), "list the top");
  t.same(top.files.map((f: any) => [f.full_path, f.is_dir]), [["a.txt", false], ["b.txt", false], ["dir/", true]], "depth 1 by default");
  t.equal(top.continuation_token, "", "no further page");
  const a = top.files[0];
  t.equal(a.size_bytes, 5);
  t.equal(typeof a.updated_at, "number", "updated_at in unix seconds");
  t.equal(typeof a.permissions, "string");
  const deep = await must(s.dev.get(`/api/v/1/filestore/${s.systemKey}/${store}/list/dir?depth=-1`), "list a directory, all depths");
  t.same(deep.files.map((f: any) => f.full_path), ["dir/c.txt", "dir/sub/", "dir/sub/d.txt", "dir/sub/data.bin"]);
  const seen: string[] = [];
  let token = "";
  let pages = 0;
  do {
    const page = await must(s.dev.get(`/api/v/1/filestore/${s.systemKey}/${store}/list?depth=-1&limit=2&continuation_token=${encodeURIComponent(token)}`), "a page");
    t.ok(page.files.length <= 2, "at most limit entries");
    seen.push(...page.files.map((f: any) => f.full_path));
    token = page.continuation_token;
    pages++;
  } while (token && pages < 20);
  t.same(seen, ["a.txt", "b.txt", "dir/", "dir/c.txt", "dir/sub/", "dir/sub/d.txt", "dir/sub/data.bin"], "pages give every entry once");
  t.equal(pages, 4);
  ok200(t, await s.dev.put(`/api/v/1/filestore/${s.systemKey}/${store}/copy/a.txt?destination=copies/a.txt`), "copy");
  ok200(t, await s.dev.put(`/api/v/1/filestore/${s.systemKey}/${store}/move/b.txt?destination=moved.txt`), "move");
  t.equal((await s.dev.get(filePath(s, store, "copies/a.txt"))).text, "a.txt");
  t.equal((await s.dev.get(filePath(s, store, "moved.txt"))).text, "b.txt");
  isErr(t, await s.dev.get(filePath(s, store, "b.txt")), 404, E.NOT_FOUND, "the moved file's old path");
  ok200(t, await s.dev.del(filePath(s, store, "moved.txt")), "delete");
  isErr(t, await s.dev.del(filePath(s, store, "moved.txt")), 404, E.NOT_FOUND, "deleted twice");
  isErr(t, await putBytes(s.dev, filePath(s, store, "big"), Buffer.alloc(1024 * 1024 + 1)), 413, E.PAYLOAD_TOO_LARGE, "a body over --max-file-mb");
  isErr(t, await s.dev.get(filePath(s, store, "big")), 404, E.NOT_FOUND, "the refused body wrote nothing");
}

t.test("a local store: create, get, list; files in and out as raw bytes, listed by depth and page, copied, moved, deleted", async (t) => {
  const store = await newStore();
  const got = await must(s.dev.get(`${storesPath(s)}/${store}`), "get");
  t.same(got, { name: store, storage_type: "local", read_auth_method: "clearblade_auth", write_auth_method: "clearblade_auth" });
  const list = await must(s.dev.get(storesPath(s)), "list");
  t.ok(Array.isArray(list) && list.some((x: any) => x.name === store));
  await filesAndListing(t, store);
  ok200(t, await s.dev.del(`${storesPath(s)}?name=${store}`), "delete the store");
  isErr(t, await s.dev.get(`${storesPath(s)}/${store}`), 404, E.NOT_FOUND, "the store is gone");
  isErr(t, await s.dev.get(filePath(s, store, "a.txt")), 404, E.NOT_FOUND, "and its files");
});

t.test("an S3 store (s3rver): the same, and credentials only with decrypt for developers", async (t) => {
  const store = await newStore({ storage_type: "s3", storage_config: s3config(uniq("p")) });
  const plain = await must(s.dev.get(`${storesPath(s)}/${store}`), "get");
  t.equal(plain.storage_config, undefined, "no settings without decrypt");
  const dec = await must(s.dev.get(`${storesPath(s)}/${store}?decrypt=true`), "get with decrypt");
  t.equal(dec.storage_config.secret_access_key, "S3RVER", "decrypt shows the credentials to the developer");
  t.equal(dec.system_key, s.systemKey);
  await filesAndListing(t, store);
});

t.test("bad store bodies: kinds and methods not supported, names taken, traversal in file paths", async (t) => {
  isErr(t, await s.dev.post(storesPath(s), { name: uniq("g"), storage_type: "gcp_bucket" }), 400, E.INVALID_ARGUMENT, "gcp_bucket is not supported");
  isErr(t, await s.dev.post(storesPath(s), { name: uniq("g"), storage_type: "sftp" }), 400, E.INVALID_ARGUMENT, "sftp is not supported");
  isErr(t, await s.dev.post(storesPath(s), { name: uniq("g"), storage_type: "network" }), 400, E.INVALID_ARGUMENT, "network is not supported");
  isErr(t, await s.dev.post(storesPath(s), { name: uniq("g"), read_auth_method: "mtls_auth" }), 400, E.INVALID_ARGUMENT, "mtls_auth is not supported");
  isErr(t, await s.dev.post(storesPath(s), { name: uniq("g"), write_auth_method: "clearblade_auth,magic" }), 400, E.INVALID_ARGUMENT, "an unknown method in a list");
  isErr(t, await s.dev.post(storesPath(s), { name: uniq("g"), storage_type: "s3", storage_config: { endpoint: "ftp://x", bucket: "b", access_key_id: "a", secret_access_key: "s" } }), 400, E.INVALID_ARGUMENT, "an s3 endpoint that is no http URL");
  isErr(t, await s.dev.post(storesPath(s), [1]), 400, E.INVALID_ARGUMENT, "an array body");
  isErr(t, await s.dev.post(storesPath(s), { name: uniq("g"), storage_type: "local", read_auth: "no_auth" }), 400, E.INVALID_ARGUMENT, "an unknown field (a misspelt method) is refused, not dropped");
  isErr(t, await s.dev.post(storesPath(s), { name: uniq("g"), system_key: other.systemKey }), 400, E.INVALID_ARGUMENT, "another system's system_key");
  ok200(t, await s.dev.post(storesPath(s), { name: uniq("g"), system_key: s.systemKey }), "its own system_key (a store read with decrypt) is taken");
  const store = await newStore();
  isErr(t, await s.dev.post(storesPath(s), { name: store }), 400, E.ALREADY_EXISTS, "a name taken");
  isErr(t, await s.dev.del(storesPath(s)), 400, E.INVALID_ARGUMENT, "delete without ?name=");
  isErr(t, await s.dev.get(`${storesPath(s)}/${uniq("missing")}`), 404, E.NOT_FOUND, "a missing store");
  for (const bad of ["..%2Fescape", "%2E%2E%2F%2E%2E%2Fescape", "a%2F%2E%2E%2F%2E%2E%2Fescape", "a//b"]) {
    isErr(t, await putBytes(s.dev, filePath(s, store, bad), Buffer.from("x")), 400, E.INVALID_ARGUMENT, `put at '${bad}'`);
    isErr(t, await s.dev.get(filePath(s, store, bad)), 400, E.INVALID_ARGUMENT, `get of '${bad}'`);
  }
  // dot segments in the URL itself are resolved before routing: nothing matches, nothing is written
  t.equal((await putBytes(s.dev, filePath(s, store, "a/%2E%2E/%2E%2E/%2E%2E/escape"), Buffer.from("x"))).status, 404, "a URL climbing out of the route finds no route");
  ok200(t, await putBytes(s.dev, filePath(s, store, "f"), Buffer.from("x")), "a file");
  isErr(t, await s.dev.put(`/api/v/1/filestore/${s.systemKey}/${store}/copy/f?destination=../../x`), 400, E.INVALID_ARGUMENT, "copy out of the store");
  isErr(t, await s.dev.put(`/api/v/1/filestore/${s.systemKey}/${store}/move/f`), 400, E.INVALID_ARGUMENT, "move without a destination");
  isErr(t, await s.dev.get(`/api/v/1/filestore/${s.systemKey}/${store}/list?depth=0`), 400, E.INVALID_ARGUMENT, "depth 0");
  isErr(t, await s.dev.get(`/api/v/1/filestore/${s.systemKey}/${store}/list?continuation_token=bogus%21`), 400, E.INVALID_ARGUMENT, "a token this listing did not give");
  t.same((await must(s.dev.get(`/api/v/1/filestore/${s.systemKey}/${store}/list?depth=-1`), "list")).files.map((f: any) => f.full_path), ["f"], "only the one file");
});

t.test("auth methods, rights and other systems", async (t) => {
  const store = await newStore({ read_auth_method: "no_auth,http_basic_auth", write_auth_method: "clearblade_auth,payload_auth" });
  ok200(t, await putBytes(s.dev, filePath(s, store, "doc.txt"), Buffer.from("hello")), "the developer writes");
  isErr(t, await other.dev.get(`${storesPath(s)}/${store}`), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "another system's developer reads the store");
  isErr(t, await putBytes(other.dev, filePath(s, store, "x"), Buffer.from("x")), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "another system's developer writes a file");
  const anon = new Client(o.url);
  isErr(t, await anon.get(filePath(s, store, "doc.txt")), 401, E.PERMISSION_DENIED, "no_auth acts as Anonymous, which holds no grant yet");
  isErr(t, await putBytes(anon, filePath(s, store, "x"), Buffer.from("x")), 401, E.AUTH_REQUIRED, "writing takes a token");
  const u = await newUser(s);
  isErr(t, await putBytes(u.client, filePath(s, store, "x"), Buffer.from("x")), 401, E.PERMISSION_DENIED, "a user without a grant writes");
  const role = uniq("writers");
  ok200(t, await s.dev.post(`/admin/user/${s.systemKey}/roles`, { name: role, filestorefiles: [{ itemInfo: { name: store }, permissions: 3 }] }), "a role with read and create on the store's files");
  ok200(t, await s.dev.put(`/admin/user/${s.systemKey}`, { user: u.userId, changes: { roles: { add: [role] } } }), "user in the role");
  ok200(t, await putBytes(u.client, filePath(s, store, "by-user.txt"), Buffer.from("u")), "the user writes with a token header");
  ok200(t, await putBytes(anon, `${filePath(s, store, "by-payload.txt")}?token=${encodeURIComponent(u.token)}`, Buffer.from("p")), "payload_auth: the token in the query");
  isErr(t, await anon.del(filePath(s, store, "by-user.txt"), undefined, { "ClearBlade-UserToken": u.token }), 401, E.PERMISSION_DENIED, "deleting needs delete");
  const basic = `Basic ${Buffer.from(`${u.email}:${u.password}`).toString("base64")}`;
  t.equal((await anon.get(filePath(s, store, "by-payload.txt"), { Authorization: basic })).text, "p", "http_basic_auth reads with the user's password");
  isErr(t, await anon.get(filePath(s, store, "by-payload.txt"), { Authorization: `Basic ${Buffer.from(`${u.email}:wrong`).toString("base64")}` }), 401, E.BAD_CREDENTIALS, "a wrong password");
  ok200(t, await s.dev.put(`/admin/user/${s.systemKey}/roles`, { id: "Anonymous", changes: { filestorefiles: [{ itemInfo: { name: store }, permissions: 1 }] } }), "Anonymous may read the store's files");
  t.equal((await anon.get(filePath(s, store, "doc.txt"))).text, "hello", "no_auth reads now");
  isErr(t, await u.client.get(`${storesPath(s)}?decrypt=true`), 401, E.DEVELOPER_ONLY, "decrypt is for developers");
  isErr(t, await u.client.post(storesPath(s), { name: uniq("u") }), 401, E.PERMISSION_DENIED, "a user without the filestores permission creates a store");
  isErr(t, await s.dev.get(`/api/v/1/filestore/${other.systemKey}/${store}/file/doc.txt`), 404, E.NOT_FOUND, "the name means nothing in the other system");
});
