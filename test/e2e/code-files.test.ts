// Files from code, black-box: ClearBladeAsync.FS(set) and File(set, path) on a bucket set, and
// ClearBladeAsync.FileStore(name), with bytes as Uint8Array and text with an encoding; the same
// files through REST; the run's user's rights; traversal and unknown boxes refused; syncFileToEdge
// to an edge the system lacks refused.
import t from "tap";
import { type DevSystem, type Outpost, devWithSystem, must, startOutpost, uniq } from "./harness.ts";
import { J, ok, refused, run, userWith } from "./code-run.ts";

let o: Outpost;
let s: DevSystem;
let set: string;
let store: string;

t.before(async () => {
  o = await startOutpost();
  s = await devWithSystem(o, "code-files");
  set = uniq("set");
  await must(s.dev.post(`/api/v/4/bucket_sets/${s.systemKey}`, { name: set }), "bucket set");
  store = uniq("store");
  await must(s.dev.post(`/api/v/1/filestore/${s.systemKey}`, { name: store, storage_type: "local" }), "file store");
});
t.teardown(() => o?.stop());

t.test("FS: write bytes and text, read back, stat, readDir, copy, rename, delete; REST sees the same files", async (t) => {
  const r = ok(t, await run(s, `
    var fs = ClearBladeAsync.FS(${J(set)});
    var bytes = new Uint8Array([0, 1, 200, 255]);
    settle(fs.writeFile("outbox/a.bin", bytes)
      .then(function () { return fs.writeFile("sandbox/dir/t.txt", "héllo"); })
      .then(function () { return Promise.all([fs.readFile("outbox/a.bin"), fs.readFile("sandbox/dir/t.txt", "utf8"), fs.stat("outbox/a.bin")]); })
      .then(function (x) {
        var back = x[0];
        return fs.copyFile("outbox/a.bin", "inbox/copy.bin")
          .then(function () { return fs.renameFile("sandbox/dir/t.txt", "sandbox/moved.txt"); })
          .then(function () { return ClearBladeAsync.File(${J(set)}, "inbox/copy.bin").read(); })
          .then(function (copy) { return fs.readDir("").then(function (names) {
            return { isBytes: back instanceof Uint8Array, back: Array.prototype.slice.call(back), text: x[1], size: x[2].size, copy: Array.prototype.slice.call(copy), names: names };
          }); });
      }));`), "FS round trip");
  t.same(r, { isBytes: true, back: [0, 1, 200, 255], text: "héllo", size: 4, copy: [0, 1, 200, 255], names: ["inbox/copy.bin", "outbox/a.bin", "sandbox/moved.txt"] });
  const b64 = (await s.dev.get(`/api/v/4/bucket_sets/${s.systemKey}/${set}/file/read?box=outbox&path=a.bin`)).text;
  t.same([...Buffer.from(b64, "base64")], [0, 1, 200, 255], "REST reads what code wrote");
  ok(t, await run(s, `settle(ClearBladeAsync.FS(${J(set)}).deleteFile("inbox/copy.bin"));`), "delete");
  t.equal((await s.dev.get(`/api/v/4/bucket_sets/${s.systemKey}/${set}/file/meta?box=inbox&path=copy.bin`)).status, 404, "deleted through code");
});

t.test("FS refuses traversal, unknown boxes, missing files and syncFileToEdge (until edge sync provides it)", async (t) => {
  refused(t, await run(s, `settle(ClearBladeAsync.FS(${J(set)}).writeFile("outbox/../../x", "x"));`), /segment/, 400, "traversal");
  refused(t, await run(s, `settle(ClearBladeAsync.FS(${J(set)}).writeFile("attic/x", "x"));`), /box/, 400, "an unknown box");
  refused(t, await run(s, `settle(ClearBladeAsync.FS(${J(set)}).readFile("inbox/none"));`), /does not exist/, 404, "a missing file");
  refused(t, await run(s, `settle(ClearBladeAsync.FS("no-such-set").readDir(""));`), /does not exist/, 404, "a missing set");
  // (a file to an edge: test/e2e/file-sync.test.ts)
  refused(t, await run(s, `settle(ClearBladeAsync.FS(${J(set)}).syncFileToEdge("outbox/a.bin", "gw1"));`), /edge/, 404, "syncFileToEdge to an edge the system lacks");
});

t.test("FileStore: write, read, list, copy, move, delete; a user needs filestorefiles", async (t) => {
  const r = ok(t, await run(s, `
    var st = ClearBladeAsync.FileStore(${J(store)});
    settle(st.write("d/one.txt", "one").then(function () { return st.write("two.bin", new Uint8Array([9, 8])); })
      .then(function () { return st.copy("d/one.txt", "d/copy.txt"); })
      .then(function () { return st.move("two.bin", "d/two.bin"); })
      .then(function () { return Promise.all([st.read("d/copy.txt", "utf8"), st.read("d/two.bin"), st.list({ prefix: "d", depth: 1, limit: 2 })]); })
      .then(function (x) { return st.delete("d/one.txt").then(function () { return { text: x[0], bytes: Array.prototype.slice.call(x[1]), page: x[2] }; }); }));`), "FileStore round trip");
  t.equal(r.text, "one");
  t.same(r.bytes, [9, 8]);
  t.same(r.page.files.map((f: any) => f.full_path), ["d/copy.txt", "d/one.txt"], "a page of two");
  t.not(r.page.continuation_token, "", "with a token for the rest");
  t.equal((await s.dev.get(`/api/v/1/filestore/${s.systemKey}/${store}/file/d/one.txt`)).status, 404, "deleted through code");
  const u = await userWith(s, {});
  refused(t, await run(s, `settle(ClearBladeAsync.FileStore(${J(store)}).read("d/copy.txt", "utf8"));`, u.client), /not allowed/, 401, "a user without filestorefiles");
  const reader = await userWith(s, { filestorefiles: [{ itemInfo: { name: store }, permissions: 1 }] });
  t.equal(ok(t, await run(s, `settle(ClearBladeAsync.FileStore(${J(store)}).read("d/copy.txt", "utf8"));`, reader.client), "a reader"), "one");
  refused(t, await run(s, `settle(ClearBladeAsync.FileStore(${J(store)}).write("x", "x"));`, reader.client), /not allowed/, 401, "a reader writing");
});
