// Bucket sets, black-box: /api/v/4/bucket_sets/{systemKey}[/{name}], the files of its boxes
// (create with base64 contents, meta, read answering bare base64, copy, move, delete, list by box);
// failure paths (bad bodies, path traversal, unknown box, other systems, missing rights, a file
// over --max-file-mb); a set's files and a system's files gone with them; s3 credentials kept
// from users.
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import t from "tap";
import { type DevSystem, type Outpost, devWithSystem, isErr, must, newUser, ok200, startOutpost, uniq } from "./harness.ts";

// error codes of src/core/errors.ts
const E = { BAD_JSON: 106, INVALID_ARGUMENT: 111, PAYLOAD_TOO_LARGE: 112, PERMISSION_DENIED: 200, NOT_AUTHORIZED_FOR_SYSTEM: 201, DEVELOPER_ONLY: 205, ALREADY_EXISTS: 207, NOT_FOUND: 208 } as const;

let o: Outpost;
let s: DevSystem;
let other: DevSystem;

t.before(async () => {
  o = await startOutpost({ args: ["--max-file-mb", "1"] });
  s = await devWithSystem(o, "files");
  other = await devWithSystem(o, "other");
});
t.teardown(() => o?.stop());

const setPath = (sys: DevSystem, name?: string) => `/api/v/4/bucket_sets/${sys.systemKey}${name === undefined ? "" : `/${encodeURIComponent(name)}`}`;
const b64 = (x: string | Buffer) => Buffer.from(x).toString("base64");
const qp = (box: string, path: string) => `?box=${encodeURIComponent(box)}&path=${encodeURIComponent(path)}`;

async function newSet(sys: DevSystem = s, extra: Record<string, unknown> = {}) {
  const name = uniq("set");
  await must(sys.dev.post(setPath(sys), { name, platform_storage: "local", edge_storage: "local", platform_config: {}, edge_config: {}, ...extra }), "create set");
  return name;
}

t.test("a set: create, get, list; files created, read as bare base64, described, listed by box, copied, moved, deleted", async (t) => {
  const name = await newSet();
  const got = await must(s.dev.get(setPath(s, name)), "get");
  t.equal(got.name, name);
  t.equal(got.system_key, s.systemKey);
  t.equal(got.platform_storage, "local");
  t.equal(got.edge_storage, "local");
  const list = await must(s.dev.get(setPath(s)), "list");
  t.ok(Array.isArray(list) && list.some((x: any) => x.name === name), "the list is an array holding the set");

  const bytes = Buffer.from([0, 1, 2, 255, 254, 10, 13]);
  const made = await must(s.dev.post(`${setPath(s, name)}/file/create`, { box: "sandbox", path: "dir/a.bin", contents: b64(bytes) }), "create file");
  t.equal(typeof made, "object", "create answers an object");
  const read = await s.dev.get(`${setPath(s, name)}/file/read${qp("sandbox", "dir/a.bin")}`);
  t.equal(read.status, 200);
  t.equal(read.text, b64(bytes), "read answers the base64 text bare, not JSON-quoted");
  t.same(Buffer.from(read.text, "base64"), bytes, "the bytes round-trip");
  const meta = await must(s.dev.get(`${setPath(s, name)}/file/meta${qp("sandbox", "dir/a.bin")}`), "meta");
  t.match(meta, { path_name: "sandbox/dir/a.bin", relative_name: "dir/a.bin", base_name: "a.bin", bucket_name: "sandbox", size: 7 });
  t.equal(typeof meta.permissions, "string");
  t.equal(typeof meta.last_modified, "string");

  ok200(t, await s.dev.post(`${setPath(s, name)}/file/create`, { box: "outbox", path: "report.txt", contents: b64("hello") }), "a file in the outbox");
  ok200(t, await s.dev.post(`${setPath(s, name)}/file/copy`, { from_box: "sandbox", from_path: "dir/a.bin", to_box: "inbox", to_path: "copied.bin" }), "copy");
  ok200(t, await s.dev.post(`${setPath(s, name)}/file/move`, { from_box: "outbox", from_path: "report.txt", to_box: "sandbox", to_path: "moved/report.txt" }), "move");
  const all = await must(s.dev.get(`${setPath(s, name)}/files?box=`), "files of all boxes");
  t.same(Object.keys(all).sort(), ["inbox/copied.bin", "sandbox/dir/a.bin", "sandbox/moved/report.txt"], "every box's files, by path_name");
  t.equal(all["inbox/copied.bin"].bucket_name, "inbox");
  const sandbox = await must(s.dev.get(`${setPath(s, name)}/files?box=sandbox`), "files of the sandbox");
  t.same(Object.keys(sandbox).sort(), ["sandbox/dir/a.bin", "sandbox/moved/report.txt"]);
  t.same(await must(s.dev.get(`${setPath(s, name)}/files?box=outbox`), "outbox"), {}, "the moved file left the outbox");
  ok200(t, await s.dev.post(`${setPath(s, name)}/file/delete`, { box: "inbox", path: "copied.bin" }), "delete");
  isErr(t, await s.dev.get(`${setPath(s, name)}/file/read${qp("inbox", "copied.bin")}`), 404, E.NOT_FOUND, "a deleted file");
  isErr(t, await s.dev.post(`${setPath(s, name)}/file/delete`, { box: "inbox", path: "copied.bin" }), 404, E.NOT_FOUND, "deleted twice");
});

t.test("bad bodies, names, boxes and paths", async (t) => {
  const name = await newSet();
  const f = `${setPath(s, name)}/file`;
  isErr(t, await s.dev.post(setPath(s), { name: "" }), 400, E.INVALID_ARGUMENT, "an empty name");
  isErr(t, await s.dev.post(setPath(s), { name: "a/b" }), 400, E.INVALID_ARGUMENT, "a name with '/'");
  isErr(t, await s.dev.post(setPath(s), { name: ".." }), 400, E.INVALID_ARGUMENT, "the name '..'");
  isErr(t, await s.dev.post(setPath(s), { name: uniq("g"), platform_storage: "gcp_bucket" }), 400, E.INVALID_ARGUMENT, "Google storage is refused by name");
  isErr(t, await s.dev.post(setPath(s), { name: uniq("g"), platform_storage: "floppy" }), 400, E.INVALID_ARGUMENT, "an unknown storage kind");
  isErr(t, await s.dev.post(setPath(s), { name: uniq("g"), platform_config: { root: "/etc" } }), 400, E.INVALID_ARGUMENT, "a local directory chosen by the request");
  isErr(t, await s.dev.post(setPath(s), { name: uniq("g"), platform_storage: "s3", platform_config: { bucket: "b" } }), 400, E.INVALID_ARGUMENT, "s3 without its endpoint and credentials");
  isErr(t, await s.dev.post(setPath(s), "{nope"), 400, E.BAD_JSON, "malformed JSON");
  isErr(t, await s.dev.post(setPath(s), { name }), 400, E.ALREADY_EXISTS, "a name taken");
  isErr(t, await s.dev.post(`${f}/create`, { box: "attic", path: "x", contents: "" }), 400, E.INVALID_ARGUMENT, "an unknown box");
  isErr(t, await s.dev.post(`${f}/create`, { path: "x", contents: "" }), 400, E.INVALID_ARGUMENT, "no box");
  isErr(t, await s.dev.post(`${f}/create`, { box: "inbox", path: "x", contents: "not base64!!" }), 400, E.INVALID_ARGUMENT, "contents not base64");
  for (const bad of ["../escape", "a/../../escape", "/etc/passwd", "a//b", ""]) {
    isErr(t, await s.dev.post(`${f}/create`, { box: "inbox", path: bad, contents: b64("x") }), 400, E.INVALID_ARGUMENT, `create at '${bad}'`);
    isErr(t, await s.dev.get(`${f}/read${qp("inbox", bad)}`), 400, E.INVALID_ARGUMENT, `read of '${bad}'`);
  }
  isErr(t, await s.dev.post(`${f}/copy`, { from_box: "inbox", from_path: "nothing", to_box: "inbox", to_path: "x" }), 404, E.NOT_FOUND, "copy of a missing file");
  isErr(t, await s.dev.post(`${f}/move`, { from_box: "inbox", from_path: "nothing", to_box: "inbox", to_path: "../../x" }), 400, E.INVALID_ARGUMENT, "move out of the set");
  isErr(t, await s.dev.get(`${f}/meta${qp("inbox", "nothing")}`), 404, E.NOT_FOUND, "meta of a missing file");
  isErr(t, await s.dev.get(`${setPath(s, name)}/files?box=attic`), 400, E.INVALID_ARGUMENT, "files of an unknown box");
  isErr(t, await s.dev.get(setPath(s, uniq("missing"))), 404, E.NOT_FOUND, "a missing set");
  t.same(await must(s.dev.get(`${setPath(s, name)}/files`), "files"), {}, "none of the failures wrote a file");
});

t.test("unknown fields are refused, and the file stays where it was", async (t) => {
  const name = await newSet();
  const f = `${setPath(s, name)}/file`;
  isErr(t, await s.dev.post(setPath(s), { name: uniq("g"), platform_storage: "local", bukket: "x" }), 400, E.INVALID_ARGUMENT, "set: an unknown field");
  isErr(t, await s.dev.post(setPath(s), JSON.parse(`{"name":"${uniq("g")}","constructor":{"prototype":{"x":1}}}`)), 400, E.INVALID_ARGUMENT, "set: an own constructor key");
  isErr(t, await s.dev.post(setPath(s), { name: uniq("g"), system_key: other.systemKey }), 400, E.INVALID_ARGUMENT, "set: another system's system_key");
  ok200(t, await s.dev.post(setPath(s), { name: uniq("g"), system_key: s.systemKey }), "set: its own system_key (a set read back) is taken");
  isErr(t, await s.dev.post(`${f}/create`, { box: "inbox", path: "a.txt", contents: b64("a"), mode: "0644" }), 400, E.INVALID_ARGUMENT, "create: an unknown field");
  ok200(t, await s.dev.post(`${f}/create`, { box: "inbox", path: "a.txt", contents: b64("a") }), "the file");
  isErr(t, await s.dev.post(`${f}/move`, { from_box: "inbox", from_path: "a.txt", to_box: "outbox", to_path: "b.txt", overwrite: true }), 400, E.INVALID_ARGUMENT, "move: an unknown field");
  isErr(t, await s.dev.post(`${f}/copy`, { from_box: "inbox", from_path: "a.txt", to_box: "outbox", to_path: "c.txt", extra: 1 }), 400, E.INVALID_ARGUMENT, "copy: an unknown field");
  isErr(t, await s.dev.post(`${f}/delete`, { box: "inbox", path: "a.txt", recursive: true }), 400, E.INVALID_ARGUMENT, "delete: an unknown field");
  t.same(Object.keys(await must(s.dev.get(`${setPath(s, name)}/files`), "files")), ["inbox/a.txt"], "the file was neither moved, copied nor deleted");
});

t.test("moves of one file at once: one moves it, the others find it gone (404, never a 500)", async (t) => {
  const name = await newSet();
  const f = `${setPath(s, name)}/file`;
  ok200(t, await s.dev.post(`${f}/create`, { box: "sandbox", path: "race/one.txt", contents: b64("one") }), "the file");
  const moves = await Promise.all(Array.from({ length: 8 }, (_, i) => s.dev.post(`${f}/move`, { from_box: "sandbox", from_path: "race/one.txt", to_box: "outbox", to_path: `race/${i}.txt` })));
  t.same(moves.map((r) => r.status).filter((x) => x !== 404), [200], `one 200, the rest 404 (got ${moves.map((r) => r.status).join(",")})`);
  for (const r of moves) if (r.status !== 200) isErr(t, r, 404, E.NOT_FOUND, "a move that lost the race");
  t.equal(Object.keys(await must(s.dev.get(`${setPath(s, name)}/files`), "files")).length, 1, "the file exists once");
});

t.test("a file over --max-file-mb is refused with 413 and writes nothing", async (t) => {
  const name = await newSet();
  const big = Buffer.alloc(1024 * 1024 + 10, 1);
  isErr(t, await s.dev.post(`${setPath(s, name)}/file/create`, { box: "inbox", path: "big", contents: b64(big) }), 413, E.PAYLOAD_TOO_LARGE, "over 1 MiB");
  ok200(t, await s.dev.post(`${setPath(s, name)}/file/create`, { box: "inbox", path: "fits", contents: b64(Buffer.alloc(1024 * 1024, 1)) }), "exactly 1 MiB fits");
  t.same(Object.keys(await must(s.dev.get(`${setPath(s, name)}/files`), "files")), ["inbox/fits"], "only the file that fit");
});

t.test("other systems, users and devices: rights by the role permission files", async (t) => {
  const name = await newSet();
  await must(s.dev.post(`${setPath(s, name)}/file/create`, { box: "inbox", path: "a.txt", contents: b64("A") }), "a file");
  isErr(t, await other.dev.get(setPath(s, name)), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "another system's developer");
  isErr(t, await other.dev.get(`${setPath(s, name)}/file/read${qp("inbox", "a.txt")}`), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "another developer reading");
  isErr(t, await other.dev.get(setPath(other, name)), 404, E.NOT_FOUND, "the name means nothing in the other system");
  const u = await newUser(s);
  isErr(t, await u.client.get(`${setPath(s, name)}/file/read${qp("inbox", "a.txt")}`), 401, E.PERMISSION_DENIED, "a user without a grant");
  isErr(t, await u.client.post(setPath(s), { name: uniq("u") }), 401, E.DEVELOPER_ONLY, "a user creating a set");
  isErr(t, await u.client.get(setPath(s)), 401, E.DEVELOPER_ONLY, "a user listing sets");
  const role = uniq("readers");
  ok200(t, await s.dev.post(`/admin/user/${s.systemKey}/roles`, { name: role, files: [{ itemInfo: { name }, permissions: 1 }] }), "a role with read on the set");
  ok200(t, await s.dev.put(`/admin/user/${s.systemKey}`, { user: u.userId, changes: { roles: { add: [role] } } }), "user in the role");
  const read = await u.client.get(`${setPath(s, name)}/file/read${qp("inbox", "a.txt")}`);
  t.equal(read.text, b64("A"), "read with the grant");
  isErr(t, await u.client.post(`${setPath(s, name)}/file/create`, { box: "inbox", path: "u.txt", contents: b64("u") }), 401, E.PERMISSION_DENIED, "writing needs create");
  isErr(t, await u.client.post(`${setPath(s, name)}/file/delete`, { box: "inbox", path: "a.txt" }), 401, E.PERMISSION_DENIED, "deleting needs delete");
  isErr(t, await u.client.del(setPath(s, name)), 401, E.DEVELOPER_ONLY, "a user deleting the set");
});

t.test("s3 credentials are kept sealed and never shown to users", async (t) => {
  const name = await newSet(s, { platform_storage: "local", edge_storage: "s3", edge_config: { endpoint: "http://127.0.0.1:9", bucket: "b", access_key_id: "AK", secret_access_key: "very-secret-key" } });
  const dev = await must(s.dev.get(setPath(s, name)), "developer's view");
  t.equal(dev.edge_config.secret_access_key, "very-secret-key", "the developer sees the credentials");
  const u = await newUser(s);
  const role = uniq("r");
  ok200(t, await s.dev.post(`/admin/user/${s.systemKey}/roles`, { name: role, files: [{ itemInfo: { name }, permissions: 1 }] }), "role");
  ok200(t, await s.dev.put(`/admin/user/${s.systemKey}`, { user: u.userId, changes: { roles: { add: [role] } } }), "user in the role");
  const seen = await must(u.client.get(setPath(s, name)), "user's view");
  t.equal(seen.edge_config.secret_access_key, undefined, "no secret for the user");
  t.equal(seen.edge_config.access_key_id, "AK");
  const db = readdirSync(o.dataDir).filter((f) => f.endsWith(".db"));
  for (const f of db) t.notOk((await import("node:fs")).readFileSync(join(o.dataDir, f)).includes("very-secret-key"), `the secret is not in clear in ${f}`);
});

t.test("deleting a set removes its files; deleting a system removes all of its files", async (t) => {
  const sys = await devWithSystem(o, "doomed");
  const name = await newSet(sys);
  await must(sys.dev.post(`${setPath(sys, name)}/file/create`, { box: "inbox", path: "x/y.txt", contents: b64("y") }), "a file");
  const setDir = join(o.dataDir, "files", sys.systemKey, "bucket_sets", name);
  t.ok(existsSync(join(setDir, "inbox", "x", "y.txt")), "the file is in the data directory");
  ok200(t, await sys.dev.del(setPath(sys, name)), "delete the set");
  t.notOk(existsSync(setDir), "its files are gone");
  isErr(t, await sys.dev.get(setPath(sys, name)), 404, E.NOT_FOUND, "the set is gone");
  const again = await newSet(sys);
  await must(sys.dev.post(`${setPath(sys, again)}/file/create`, { box: "sandbox", path: "z", contents: b64("z") }), "a file");
  t.ok(existsSync(join(o.dataDir, "files", sys.systemKey)), "the system's files");
  ok200(t, await sys.dev.del(`/admin/systemmanagement?id=${sys.systemKey}`), "delete the system");
  t.notOk(existsSync(join(o.dataDir, "files", sys.systemKey)), "the system's files are gone with it");
});
