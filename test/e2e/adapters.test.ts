// Adapters with a real platform and a
// real edge: definitions, files with versions, command mapping, control of an edge over the sync
// channel (deploy a shell script, start, status, logs, stop, undeploy), the edge's files on disk
// (inside --adapters-dir, with their permissions; replaced whole, never seen cut short), sync of
// adapters to an edge that was offline, and the failure paths (a file's content missing from the
// platform's database is an error naming the file).
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import t from "tap";
import pg from "pg";
import { Client, devWithSystem, isEnvelope, newUser, type Outpost, pgDatabaseOf, request, startOutpost, TEST_DB, uniq, waitFor } from "./harness.ts";
import { pgUrlFor } from "../pgdb.ts";

const b64 = (s: string) => Buffer.from(s).toString("base64");

const platform = await startOutpost();
const s = await devWithSystem(platform, "adapters");
const SK = s.systemKey;
const base = `/api/v/4/${SK}/adapters`;
const admin = `/admin/${SK}/adaptors`;

const EDGE = uniq("edge");
const created = await s.dev.post(`/admin/edges/${SK}/${EDGE}`, { description: "adapter edge" });
if (created.status !== 200) throw new Error(created.text);
const adaptersDir = mkdtempSync(join(tmpdir(), "outpost-adapters-"));
const edgeArgs = ["--mode", "edge", "--platform-url", platform.url, "--system-key", SK, "--edge-name", EDGE, "--edge-token", created.body.token, "--adapters-dir", adaptersDir];
let edge: Outpost = await startOutpost({ args: edgeArgs, keepData: true });
t.teardown(async () => { await edge.stop(); await platform.stop(); });
const connected = () => s.dev.get(`/admin/edges/${SK}/${EDGE}`).then((r) => r.body.isConnected === true);
// generous: at the start of a run every test file starts its servers at once
if (!(await waitFor(connected, 45_000))) throw new Error(`the edge did not connect:\n${edge.logs().slice(-2000)}`);

// the edge gets every adapter
const tpl = await s.dev.put(`/admin/edges/template/${SK}/${EDGE}`, { add: [{ def_module: "adapter", def_name: "*", mode: "sync_to_edge" }] });
if (tpl.status !== 200) throw new Error(tpl.text);

const START = `#!/bin/sh
# a stand-in adapter: a background process that writes a heartbeat and a pid file
nohup sh -c 'while true; do date +%s > heartbeat; sleep 0.2; done' > adapter.log 2>&1 &
echo $! > adapter.pid
echo "started $(cat adapter.pid)"
`;
const STATUS = `#!/bin/sh
if [ -f adapter.pid ] && kill -0 "$(cat adapter.pid)" 2>/dev/null; then echo running; else echo stopped; exit 3; fi
`;
const STOP = `#!/bin/sh
[ -f adapter.pid ] && kill "$(cat adapter.pid)" && rm -f adapter.pid
echo stopped
`;

/** A developer client signed in on an edge (developers sign in there with their platform credentials). */
async function devOn(node: Outpost): Promise<Client> {
  const a = await request(node.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
  if (a.status !== 200) throw new Error(`developer sign-in on the edge: ${a.status} ${a.text}`);
  return new Client(node.url, { "ClearBlade-DevToken": a.body.dev_token });
}

async function control(name: string, command: string, edges: string[] = [EDGE], extra: Record<string, unknown> = {}) {
  return s.dev.put(`${base}/${name}/control`, { command, edges, ...extra });
}

t.test("adapter CRUD on both path families, with the wire fields", async (t) => {
  const name = uniq("crud");
  const c = await s.dev.post(base, { name, description: "modbus bridge", protocol: "modbus", architecture: "linux-amd64", os: "linux", start_command: "./start.sh", run_start_on_deploy: false });
  t.equal(c.status, 200, c.text);
  t.match(c.body, { name, description: "modbus bridge", protocol: "modbus", architecture: "linux-amd64", os: "linux", start_command: "./start.sh", stop_command: "", run_start_on_deploy: false, version: 1 });
  const g = await s.dev.get(`${admin}/${name}`);
  t.equal(g.status, 200, "read on /admin/{sk}/adaptors");
  t.same(g.body, c.body);
  t.ok((await s.dev.get(base)).body.some((a: any) => a.name === name), "listed on /api/v/4");
  t.ok((await s.dev.get(admin)).body.some((a: any) => a.name === name), "listed on /admin/.../adaptors");
  const u = await s.dev.put(`${admin}/${name}`, { stop_command: "./stop.sh", description: "changed" });
  t.equal(u.status, 200, u.text);
  t.match(u.body, { stop_command: "./stop.sh", description: "changed", start_command: "./start.sh", version: 2 });

  for (const [what, body] of [["no name", {}], ["name starting with a dash", { name: "-ab" }], ["name with a space", { name: "a b" }], ["unknown field", { name: uniq("x"), colour: 1 }], ["flag not boolean", { name: uniq("x"), run_start_on_deploy: "yes" }], ["already exists", { name }]] as const) {
    const r = await s.dev.post(base, body);
    t.equal(r.status, 400, `${what}: ${r.text}`);
    t.ok(isEnvelope(r.body, 400));
  }
  t.equal((await s.dev.put(`${base}/${name}`, { name: "other" })).status, 400, "no renaming");
  t.equal((await s.dev.get(`${base}/nope`)).status, 404);
  const user = await newUser(s);
  t.equal((await user.client.get(base)).status, 401, "developers only");
  t.equal((await new Client(platform.url).get(base)).status, 401);
  const d = await s.dev.del(`${base}/${name}`);
  t.equal(d.status, 200);
  t.equal((await s.dev.get(`${base}/${name}`)).status, 404, "deleted");
  t.equal((await s.dev.del(`${base}/${name}`)).status, 404);
});

t.test("files: versions, content stored once, download, overwrite, delete, command mapping, failures", async (t) => {
  const name = uniq("files");
  t.equal((await s.dev.post(base, { name })).status, 200);
  const f1 = await s.dev.post(`${base}/${name}/files`, { name: "start.sh", path_name: "bin/start.sh", permissions: "0755", owner: "", group: "", file: b64("echo one\n") });
  t.equal(f1.status, 200, f1.text);
  t.match(f1.body, { name: "start.sh", adaptor_name: name, path_name: "bin/start.sh", permissions: "0755", version: 1, size: 9 });
  t.notOk("file" in f1.body, "the answer carries the configuration, not the content");
  const f2 = await s.dev.post(`${base}/${name}/files`, { name: "start.sh", file: b64("echo two\n") });
  t.equal(f2.body.version, 2, "posting again replaces the file with a new version");
  t.equal(f2.body.path_name, "bin/start.sh", "configuration not sent is kept");
  const over = await s.dev.put(`${base}/${name}/files/start.sh`, { file: b64("echo three\n"), permissions: "700" });
  t.equal(over.status, 200, over.text);
  t.match(over.body, { version: 3, permissions: "700", file: b64("echo three\n") }, "PUT answers with configuration and content");
  const same = await s.dev.put(`${base}/${name}/files/start.sh`, { file: b64("echo one\n") });
  t.equal(same.body.version, 4);
  t.equal(same.body.sha256, f1.body.sha256, "the same content has the same hash (stored once)");

  const all = await s.dev.get(`${base}/${name}/files`);
  t.equal(all.status, 200);
  t.same(all.body.map((f: any) => f.version), [1, 2, 3, 4], "every version's configuration");
  t.same(all.body.map((f: any) => f.current), [false, false, false, true]);
  t.notOk(all.body.some((f: any) => "file" in f), "no contents in the listing");
  const dl = await s.dev.get(`${admin}/${name}/files/start.sh`);
  t.equal(Buffer.from(dl.body.file, "base64").toString(), "echo one\n", "download: the current content");
  const old = await s.dev.get(`${base}/${name}/files/start.sh?version=2`);
  t.equal(Buffer.from(old.body.file, "base64").toString(), "echo two\n", "an older version by number");

  const map = await s.dev.put(`${base}/${name}`, { command: "start", file: "start.sh" });
  t.equal(map.status, 200, map.text);
  t.equal(map.body.start_command, "./bin/start.sh", "a command mapped to a file runs that file");

  const bad: [string, string, unknown, number][] = [
    ["content not base64", "POST", { name: "x.sh", file: "not base64!!" }, 400],
    ["content with a bad length", "POST", { name: "x.sh", file: "abc" }, 400],
    ["path with ..", "POST", { name: "x.sh", path_name: "../x.sh", file: b64("x") }, 400],
    ["path with .. inside", "POST", { name: "x.sh", path_name: "a/../../x.sh", file: b64("x") }, 400],
    ["absolute path", "POST", { name: "x.sh", path_name: "/etc/passwd", file: b64("x") }, 400],
    ["bad permissions", "POST", { name: "x.sh", permissions: "rwx", file: b64("x") }, 400],
    ["no content", "POST", { name: "x.sh" }, 400],
    ["no name", "POST", { file: b64("x") }, 400],
    ["file name starting with a dash", "POST", { name: "-x.sh", file: b64("x") }, 400],
    ["PUT without file", "PUT", { permissions: "0755" }, 400],
    ["PUT bad base64", "PUT", { file: "%%%" }, 400],
  ];
  for (const [what, method, body, status] of bad) {
    const r = method === "POST" ? await s.dev.post(`${base}/${name}/files`, body) : await s.dev.put(`${base}/${name}/files/start.sh`, body);
    t.equal(r.status, status, `${what}: ${r.text}`);
    t.ok(isEnvelope(r.body, status), `${what}: envelope`);
  }
  t.equal((await s.dev.get(`${base}/${name}/files`)).body.length, 4, "refused writes made no versions");
  t.equal((await s.dev.put(`${base}/${name}`, { command: "start", file: "nope.sh" })).status, 404, "mapping to a missing file");
  t.equal((await s.dev.put(`${base}/${name}`, { command: "fly", file: "start.sh" })).status, 400, "mapping an unknown command");
  t.equal((await s.dev.get(`${base}/${name}/files/nope.sh`)).status, 404);
  t.equal((await s.dev.get(`${base}/${name}/files/start.sh?version=99`)).status, 404);
  t.equal((await s.dev.put(`${base}/${name}/files/nope.sh`, { file: b64("x") })).status, 404);
  t.equal((await s.dev.del(`${base}/${name}/files/start.sh`)).status, 200);
  t.equal((await s.dev.get(`${base}/${name}/files`)).body.length, 0, "deleting a file removes its versions");
  t.equal((await s.dev.del(`${base}/${name}/files/start.sh`)).status, 404);
});

async function scriptedAdapter(name: string, extra: Record<string, unknown> = {}) {
  const c = await s.dev.post(base, { name, description: "scripted", start_command: "./start.sh", stop_command: "./stop.sh", status_command: "./status.sh", logs_command: "cat adapter.log; echo logs-ok", undeploy_command: "echo bye", ...extra });
  if (c.status !== 200) throw new Error(c.text);
  for (const [file, content, perms] of [["start.sh", START, "0755"], ["stop.sh", STOP, "0755"], ["status.sh", STATUS, "0750"], ["config.json", `{"port": 502}`, "0640"]] as const) {
    const r = await s.dev.post(`${base}/${name}/files`, { name: file, path_name: file === "config.json" ? "conf/config.json" : file, permissions: perms, file: b64(content) });
    if (r.status !== 200) throw new Error(r.text);
  }
}

t.test("control: deploy a shell-script adapter, start, status, logs, stop, undeploy on a real edge", async (t) => {
  const name = uniq("plc");
  await scriptedAdapter(name);
  const dir = join(adaptersDir, name);
  const dep = await control(name, "deploy");
  t.equal(dep.status, 200, dep.text);
  t.match(dep.body[EDGE], { err: false, command: "deploy" }, "deployed");
  t.ok(existsSync(join(dir, "start.sh")) && existsSync(join(dir, "conf/config.json")), "files written under the adapters directory, subdirectories made");
  t.equal(statSync(join(dir, "start.sh")).mode & 0o777, 0o755, "start.sh is 0755");
  t.equal(statSync(join(dir, "status.sh")).mode & 0o777, 0o750, "status.sh is 0750");
  t.equal(statSync(join(dir, "conf/config.json")).mode & 0o777, 0o640, "config.json is 0640");
  t.equal(readFileSync(join(dir, "conf/config.json"), "utf8"), `{"port": 502}`);

  const st0 = await control(name, "status");
  t.match(st0.body[EDGE], { err: true, command: "status" }, "status before start: not running (exit 3)");
  t.match(st0.body[EDGE].output, /stopped/);
  const start = await control(name, "start");
  t.match(start.body[EDGE], { err: false, command: "start" }, start.text);
  t.match(start.body[EDGE].output, /started \d+/, "the start script's output comes back");
  t.ok(await waitFor(() => existsSync(join(dir, "heartbeat")), 5000), "the adapter runs in the background on the edge");
  const st1 = await control(name, "status");
  t.match(st1.body[EDGE], { err: false, output: /running/ }, "status: running");
  const logs = await control(name, "logs");
  t.match(logs.body[EDGE], { err: false, output: /logs-ok/ });
  const stop = await control(name, "stop");
  t.match(stop.body[EDGE], { err: false, output: /stopped/ });
  const st2 = await control(name, "status");
  t.match(st2.body[EDGE], { err: true, output: /stopped/ }, "status after stop");
  const und = await control(name, "undeploy");
  t.match(und.body[EDGE], { err: false, output: /bye/ });
  t.notOk(existsSync(dir), "undeploy removes the adapter's files");
  const after = await control(name, "start");
  t.match(after.body[EDGE], { err: true, output: /not deployed/ }, "starting an undeployed adapter is an error");
});

t.test("from code: ClearBladeAsync.Adapters() and Adapter(name): meta, files as text and bytes, control on the edge; a user is refused", async (t) => {
  const name = uniq("coded");
  const svc = uniq("adapterSvc");
  // every call ClearBlade documents for the two, in one run; the answers in order
  const code = `function ${svc}(req, resp) {
    var out = {}, A = ClearBladeAsync.Adapters(), a = ClearBladeAsync.Adapter("${name}");
    A.create({ name: "${name}", description: "from code", start_command: "./start.sh", status_command: "./status.sh", stop_command: "./stop.sh" })
      .then(function (m) { out.created = [m.name, m.description, m.version]; return A.list(); })
      .then(function (l) { out.listed = l.some(function (x) { return x.name === "${name}"; }); return a.update({ description: "changed" }); })
      .then(function (m) { out.updated = [m.description, m.version]; return A.read("${name}"); })
      .then(function (m) { out.read = m.description;
        return Promise.all([a.createFile({ name: "start.sh", path_name: "start.sh", permissions: "0755", file: req.params.start }),
          a.createFile({ name: "status.sh", path_name: "status.sh", permissions: "0755", file: req.params.status }),
          a.createFile({ name: "stop.sh", path_name: "stop.sh", permissions: "0755", file: req.params.stop }),
          a.createFile({ name: "blob.bin", path_name: "blob.bin", file: new Uint8Array([0, 255, 1, 128]) })]); })
      .then(function () { return a.listFiles(); })
      .then(function (files) { out.files = files.map(function (f) { return f.name + ":" + f.size; }).sort(); return a.readFile("start.sh", "utf8"); })
      .then(function (f) { out.text = f.file === req.params.start; return a.readFile("blob.bin"); })
      .then(function (f) { out.bytes = [f.file instanceof Uint8Array, Array.prototype.slice.call(f.file)]; return a.updateFile("blob.bin", { file: "now text" }, "utf8"); })
      .then(function (f) { out.rewritten = [f.file, f.version]; return a.deleteFile("blob.bin"); })
      .then(function () { return a.control("deploy", ["${EDGE}"]); })
      .then(function (r) { out.deploy = r["${EDGE}"].err; return a.control("start", ["${EDGE}"]); })
      .then(function (r) { out.start = r["${EDGE}"].err; return a.control("status", ["${EDGE}"]); })
      .then(function (r) { out.status = r["${EDGE}"]; return a.control("stop", ["${EDGE}"]); })
      .then(function () { return a.control("fly", ["${EDGE}"]).then(function () { return "flew"; }, function (e) { return e.message; }); })
      .then(function (m) { out.badCommand = m; return a.readFile("nope.sh").then(function () { return "read"; }, function (e) { return e.message; }); })
      .then(function (m) { out.missing = m; return a.delete(); })
      .then(function () { return A.read("${name}").then(function () { return "still there"; }, function (e) { return e.message; }); })
      .then(function (m) { out.deleted = m; resp.success(out); }, function (e) { resp.error(e.message); });
  }`;
  t.equal((await s.dev.post(`/admin/code/v/1/${SK}/${svc}`, { code, parameters: [], execution_timeout: 60 })).status, 200, "service saved");
  const r = await s.dev.post(`/api/v/1/code/${SK}/${svc}`, { start: START, status: STATUS, stop: STOP });
  t.equal(r.body?.success, true, r.text.slice(0, 600));
  const out = r.body.results;
  t.same(out.created, [name, "from code", 1], "created, its meta answered");
  t.equal(out.listed, true, "listed");
  t.same(out.updated, ["changed", 2], "updated");
  t.equal(out.read, "changed", "read by name");
  t.same(out.files, ["blob.bin:4", "start.sh:" + Buffer.byteLength(START), "status.sh:" + Buffer.byteLength(STATUS), "stop.sh:" + Buffer.byteLength(STOP)], "files listed once each, without contents");
  t.equal(out.text, true, "a file read with an encoding is its text");
  t.same(out.bytes, [true, [0, 255, 1, 128]], "without one, its bytes");
  t.same(out.rewritten, ["now text", 2], "updateFile: a new version, answered in the encoding asked for");
  t.same([out.deploy, out.start], [false, false], "deployed and started on the edge");
  t.match(out.status, { err: false, command: "status", output: /running/ }, "control answers per edge: {err, command, output}");
  t.match(out.badCommand, /command must be one of/, "an unknown command is refused");
  t.match(out.missing, /does not exist/, "a missing file is an error");
  t.match(out.deleted, /does not exist/, "deleted");

  // a user's run reaches the same checks as the REST routes: adapters are the developer's
  const u = await newUser(s);
  const userSvc = uniq("adapterUser");
  await s.dev.post(`/admin/code/v/1/${SK}/${userSvc}`, { code: `function ${userSvc}(req, resp) { ClearBladeAsync.Adapters().list().then(resp.success, function (e) { resp.error(e.message); }); }`, parameters: [] });
  await s.dev.put(`/admin/user/${SK}/roles`, { id: "Authenticated", changes: { services: [{ itemInfo: { name: userSvc }, permissions: 1 }] } });
  const ur = await u.client.post(`/api/v/1/code/${SK}/${userSvc}`, {});
  t.equal(ur.body?.success, false, `a user's run is refused: ${ur.text.slice(0, 300)}`);
});

t.test("control: a command past its time limit is killed; bad requests; an edge that is down", async (t) => {
  const name = uniq("slow");
  t.equal((await s.dev.post(base, { name, start_command: "sleep 30; echo never", status_command: "exit 7" })).status, 200);
  t.equal((await control(name, "deploy")).body[EDGE].err, false);
  const t0 = Date.now();
  const hang = await control(name, "start", [EDGE], { timeout: 1 });
  t.equal(hang.status, 200);
  t.match(hang.body[EDGE], { err: true, output: /did not finish within 1 s/ });
  t.ok(Date.now() - t0 < 8000, `killed at its limit (${Date.now() - t0} ms)`);
  t.match((await control(name, "status")).body[EDGE], { err: true, output: /exited with 7/ }, "a failing command reports its exit code");
  t.match((await control(name, "restart")).body[EDGE], { err: true, output: /no stop command/ }, "a command that is not set");

  for (const [what, body, status] of [
    ["unknown command", { command: "fly", edges: [EDGE] }, 400], ["no edges", { command: "status", edges: [] }, 400],
    ["edges not a list", { command: "status", edges: 5 }, 400], ["bad timeout", { command: "status", edges: [EDGE], timeout: 0 }, 400],
    ["an unknown field", { command: "status", edges: [EDGE], nope: 1 }, 400],
  ] as const) {
    const r = await s.dev.put(`${base}/${name}/control`, body);
    t.equal(r.status, status, `${what}: ${r.text}`);
    t.ok(isEnvelope(r.body, status));
  }
  t.equal((await control("no-such-adapter", "status")).status, 404);

  // an edge that exists but is down answers at once with an error
  const down = uniq("down");
  t.equal((await s.dev.post(`/admin/edges/${SK}/${down}`, {})).status, 200);
  const t1 = Date.now();
  const r = await control(name, "status", [EDGE, down]);
  t.equal(r.status, 200);
  t.match(r.body[down], { err: true, output: /not connected/ });
  t.match(r.body[EDGE], { err: true, output: /exited with 7/ }, "the other edge still answers");
  // an unknown edge is an error entry too: one bad name does not stop the fleet
  const mixed = await control(name, "status", [EDGE, "no-such-edge"]);
  t.equal(mixed.status, 200);
  t.match(mixed.body["no-such-edge"], { err: true, output: /does not exist/ });
  t.match(mixed.body[EDGE], { err: true, output: /exited with 7/ }, "the known edge still ran the command");
  t.ok(Date.now() - t1 < 5000, "without waiting for the down edge");
});

t.test("files are confined to the adapters directory on the edge too", async (t) => {
  // a file whose path is refused by the platform never exists; the edge's own check is exercised
  // through a symlink planted in the adapter's directory pointing outside
  const name = uniq("conf");
  await scriptedAdapter(name);
  t.equal((await control(name, "deploy")).body[EDGE].err, false);
  const { symlinkSync } = await import("node:fs");
  const outside = mkdtempSync(join(tmpdir(), "outside-"));
  symlinkSync(outside, join(adaptersDir, name, "conf2"));
  t.equal((await s.dev.post(`${base}/${name}/files`, { name: "esc.txt", path_name: "conf2/esc.txt", file: b64("escape") })).status, 200);
  const r = await control(name, "deploy");
  t.match(r.body[EDGE], { err: true, output: /symbolic link/ }, "a write through a link is refused");
  t.notOk(existsSync(join(outside, "esc.txt")), "nothing was written outside");
});

t.test("a deployed adapter's files are replaced whole as they change: a reader never sees one empty or cut short", async (t) => {
  const name = uniq("whole");
  const BIG = 4 * 1024 * 1024;
  const big = Buffer.alloc(BIG, "outpost adapter file ");
  t.equal((await s.dev.post(base, { name })).status, 200);
  // written in name order: big.bin before tick.txt, so tick.txt's last content on disk means the
  // big file was written again after every change before it
  t.equal((await s.dev.post(`${base}/${name}/files`, { name: "big.bin", file: big.toString("base64") })).status, 200);
  t.equal((await s.dev.post(`${base}/${name}/files`, { name: "tick.txt", file: b64("0") })).status, 200);
  t.equal((await control(name, "deploy")).body[EDGE]?.err, false, "deployed");
  const file = join(adaptersDir, name, "big.bin"), tick = join(adaptersDir, name, "tick.txt");
  t.ok(await waitFor(() => existsSync(tick) && statSync(file).size === BIG), "on the edge's disk");

  // another thread watches the file's size as fast as it can while every change of the adapter
  // makes the edge write its files again
  const stop = new SharedArrayBuffer(4);
  const watcher = new Worker(`
    const { parentPort, workerData } = require("node:worker_threads");
    const { statSync } = require("node:fs");
    const flag = new Int32Array(workerData.stop);
    const seen = new Set();
    let looks = 0;
    while (Atomics.load(flag, 0) === 0) {
      let size;
      try { size = statSync(workerData.file).size; } catch (e) { size = e.code; }
      seen.add(size);
      looks++;
    }
    parentPort.postMessage({ seen: [...seen], looks });`, { eval: true, workerData: { file, stop } });
  const result = new Promise<{ seen: (number | string)[]; looks: number }>((r) => watcher.once("message", r));
  const CHANGES = 12;
  for (let i = 1; i <= CHANGES; i++) {
    t.equal((await s.dev.put(`${base}/${name}/files/tick.txt`, { file: b64(String(i)) })).status, 200);
    // one change at a time reaches the edge (each is one more rewrite)
    t.ok(await waitFor(() => readFileSync(tick, "utf8") === String(i), 20_000), `change ${i} written on the edge`);
  }
  Atomics.store(new Int32Array(stop), 0, 1);
  const { seen, looks } = await result;
  await watcher.terminate();
  t.ok(looks > 100, `the size was looked at ${looks} times`);
  t.same(seen, [BIG], "only ever the whole file");
  t.equal(readFileSync(file).compare(big), 0, "its content");
});

t.test("a file whose content is missing from the platform's database is an error naming it, never an empty file on the edge", async (t) => {
  const name = uniq("lost");
  await scriptedAdapter(name);
  t.equal((await control(name, "deploy")).body[EDGE]?.err, false, "deployed");
  const conf = join(adaptersDir, name, "conf/config.json");
  t.equal(readFileSync(conf, "utf8"), `{"port": 502}`);
  // a content of its own (the others' config.json is shared), then taken away behind the platform's back
  const lost = `{"port": ${Date.now()}}`;
  t.equal((await s.dev.put(`${base}/${name}/files/config.json`, { file: b64(lost) })).status, 200);
  t.ok(await waitFor(() => readFileSync(conf, "utf8") === lost), "the change reached the deployed adapter on the edge");
  await deleteBlob(createHash("sha256").update(lost).digest("hex"));
  const r = await control(name, "deploy");
  t.equal(r.status, 500, r.text);
  t.match(r.body.error?.detail, new RegExp(`adapter '${name}': the content of file 'config\\.json' \\(version 2, sha256 [0-9a-f]{64}\\) is missing`), "naming the file");
  const dl = await s.dev.get(`${base}/${name}/files/config.json`);
  t.equal(dl.status, 500, "a download of it too");
  t.match(dl.body.error?.detail, /the content of file 'config\.json'/);
  t.equal(readFileSync(conf, "utf8"), lost, "the edge's file is left as it was");
});

/** Deletes a content from the platform's database, as damage would. */
async function deleteBlob(hash: string) {
  if (TEST_DB === "postgres") {
    const c = new pg.Client({ connectionString: pgUrlFor(pgDatabaseOf(platform.dataDir)) });
    await c.connect();
    try { await c.query("DELETE FROM blobs WHERE hash = $1", [hash]); } finally { await c.end(); }
    return;
  }
  const { default: Database } = await import("libsql");
  const db = new Database(join(platform.dataDir, "outpost.db"), { timeout: 5000 });
  try { db.prepare("DELETE FROM blobs WHERE hash = ?").run(hash); } finally { db.close(); }
}

t.test("adapters sync to the edge; an edge that was offline gets the current versions; edges of an adapter", async (t) => {
  const name = uniq("synced");
  await scriptedAdapter(name);
  const ed = await devOn(edge);
  t.ok(await waitFor(async () => (await ed.get(`${base}/${name}`)).status === 200), "the adapter reaches the edge's database");
  t.ok(await waitFor(async () => (await ed.get(`${base}/${name}/files`)).body.length === 4), "with its files");
  t.ok(await waitFor(async () => (await s.dev.get(`/admin/${SK}/sync/edge/status/${EDGE}`)).body.some((a: any) => a.asset_type === "adapter" && a.asset_name === name && a.status === "synced")), "the sync status shows the adapter synced");
  t.equal((await control(name, "deploy")).body[EDGE].err, false);

  const edges = await s.dev.get(`/admin/edges/${SK}/control?adapter=${name}`);
  t.equal(edges.status, 200, edges.text);
  t.same(edges.body, [EDGE], "the edges whose template has the adapter");
  const all = await s.dev.get(`/admin/edges/${SK}/control`);
  t.same(all.body[name], [EDGE]);
  t.equal((await s.dev.get(`/admin/edges/${SK}/control?adapter=nope`)).status, 404);

  await edge.stop();
  t.ok(await waitFor(async () => !(await connected())), "the edge is down");
  const upd = await s.dev.put(`${base}/${name}/files/config.json`, { file: b64(`{"port": 1502}`) });
  t.equal(upd.status, 200);
  t.match((await control(name, "status")).body[EDGE], { err: true, output: /not connected/ }, "control of a down edge");
  edge = await startOutpost({ args: edgeArgs, dataDir: edge.dataDir, keepData: true });
  t.ok(await waitFor(connected), "the edge is back");
  const file = join(adaptersDir, name, "conf/config.json");
  t.ok(await waitFor(() => existsSync(file) && readFileSync(file, "utf8") === `{"port": 1502}`), "the deployed adapter's file was brought up to date on disk");
  const edEdge = await devOn(edge);
  const v = await edEdge.get(`${base}/${name}/files/config.json`);
  t.equal(v.body.version, 2, "the edge has the current version");
  t.equal((await s.dev.del(`${base}/${name}`)).status, 200);
  t.ok(await waitFor(async () => (await edEdge.get(`${base}/${name}`)).status === 404), "a deleted adapter leaves the edge");
});
