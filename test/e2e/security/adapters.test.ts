// Adapter commands seen from someone who controls an adapter, on a real platform and a real edge
// (default layout: adapters under <data-dir>/adapters): a command gets a clean environment (no
// edge token, no OUTPOST_* setting, nothing else of the edge's), cannot list the data directory
// or read the database or the secret key, runs as an unprivileged user when the edge runs as root
// (nobody, or --adapters-user), and a deploy never writes through a symbolic link, dangling or
// not. Then what a hostile caller sends to the adapter routes.
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { Client, devWithSystem, isErr, type Outpost, request, startOutpost, uniq, waitFor } from "../harness.ts";

const b64 = (s: string) => Buffer.from(s).toString("base64");
const asRoot = process.getuid?.() === 0;
const rootOnly = { skip: asRoot ? false : "the edge switches users only when it runs as root" };

/** A user of this host as /etc/passwd lists it. */
function passwd(pred: (name: string, uid: number) => boolean): { name: string; uid: number; gid: number } | undefined {
  for (const line of readFileSync("/etc/passwd", "utf8").split("\n")) {
    const f = line.split(":");
    if (f.length >= 4 && pred(f[0]!, Number(f[2]))) return { name: f[0]!, uid: Number(f[2]), gid: Number(f[3]) };
  }
  return undefined;
}
const nobody = passwd((n) => n === "nobody");
// another unprivileged user for --adapters-user (daemon on Debian)
const other = passwd((n, uid) => uid > 0 && n !== "nobody" && uid !== nobody?.uid);

const platform = await startOutpost();
const s = await devWithSystem(platform, "adapter-security");
const SK = s.systemKey;
const base = `/api/v/4/${SK}/adapters`;
t.teardown(() => platform.stop());

// every adapter reaches every edge of this system
async function newEdge(): Promise<{ name: string; token: string }> {
  const name = uniq("edge");
  const r = await s.dev.post(`/admin/edges/${SK}/${name}`, { description: "adapter security" });
  if (r.status !== 200) throw new Error(r.text);
  const tpl = await s.dev.put(`/admin/edges/template/${SK}/${name}`, { add: [{ def_module: "adapter", def_name: "*", mode: "sync_to_edge" }] });
  if (tpl.status !== 200) throw new Error(tpl.text);
  return { name, token: r.body.token };
}
const connected = (edge: string) => s.dev.get(`/admin/edges/${SK}/${edge}`).then((r) => r.body.isConnected === true);

/** An edge with its token and settings in the environment (so a leak of it would show), plus a
 *  variable of the operator's that is none of an adapter's business. */
async function startEdge(e: { name: string; token: string }, args: string[] = [], dataDir?: string): Promise<Outpost> {
  const edge = await startOutpost({
    args: ["--mode", "edge", "--platform-url", platform.url, "--system-key", SK, "--edge-name", e.name, ...args],
    env: { OUTPOST_EDGE_TOKEN: e.token, OUTPOST_LOG_LEVEL: "warn", OPERATOR_SECRET: "operator-secret-value" },
    keepData: true, ...(dataDir ? { dataDir } : {}),
  });
  if (!(await waitFor(() => connected(e.name), 45_000))) throw new Error(`the edge did not connect:\n${edge.logs().slice(-2000)}`);
  return edge;
}

const E1 = await newEdge();
const edge = await startEdge(E1);
t.teardown(() => edge.stop());
const dataDir = realpathSync(edge.dataDir);
const adaptersDir = join(dataDir, "adapters");

/** An adapter whose status command is `line`, deployed to `edgeName`; its status result. */
async function runOn(edgeName: string, line: string, name = uniq("cmd")) {
  const c = await s.dev.post(base, { name, status_command: line });
  if (c.status !== 200) throw new Error(c.text);
  const dep = await s.dev.put(`${base}/${name}/control`, { command: "deploy", edges: [edgeName] });
  if (dep.status !== 200 || dep.body[edgeName]?.err !== false) throw new Error(`deploy: ${dep.text}`);
  const r = await s.dev.put(`${base}/${name}/control`, { command: "status", edges: [edgeName] });
  if (r.status !== 200) throw new Error(r.text);
  return r.body[edgeName] as { err: boolean; output: string };
}
const run = (line: string, name?: string) => runOn(E1.name, line, name);

t.test("a command's environment holds nothing of the edge's", async (t) => {
  const r = await run("env");
  t.equal(r.err, false, r.output);
  const vars = new Map(r.output.split("\n").filter((l) => l.includes("=")).map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]));
  t.notOk(r.output.includes(E1.token), "no edge token");
  t.same([...vars.keys()].filter((k) => k.startsWith("OUTPOST_")), [], "no OUTPOST_* variable");
  t.notOk(r.output.includes("operator-secret-value"), "no other variable of the edge's");
  // PWD and SHLVL the shell sets itself
  t.same([...vars.keys()].filter((k) => !["PATH", "HOME", "LANG", "PWD", "SHLVL", "_", "OLDPWD"].includes(k)), [], `only PATH, HOME, LANG: ${[...vars.keys()].join(" ")}`);
  t.ok(vars.get("PATH"), "PATH is set");
  t.ok(vars.get("HOME"), "HOME is set");
});

t.test("a command cannot read the edge's environment, list the data directory or read its files", rootOnly, async (t) => {
  t.ok(existsSync(join(dataDir, "outpost.db")) && existsSync(join(dataDir, "secret.key")), "the data directory holds the database and the secret key");
  const env = await run(`cat /proc/$PPID/environ | tr '\\0' '\\n'`);
  t.notOk(env.output.includes(E1.token), "the edge process's environment is not readable (no token)");
  const ls = await run(`ls -a ${dataDir}`);
  t.equal(ls.err, true, `ls <data dir> fails: ${ls.output}`);
  t.notMatch(ls.output, /outpost\.db|secret\.key/, "no listing");
  // the last through a path relative to the adapter's directory (<data-dir>/adapters/<name>)
  for (const f of [join(dataDir, "secret.key"), join(dataDir, "outpost.db"), "../../secret.key"]) {
    const r = await run(`cat ${f} > /dev/null`);
    t.equal(r.err, true, `cat ${f} fails`);
    t.match(r.output, /Permission denied/, `cat ${f}: permission denied`);
  }
  t.equal(readFileSync(join(dataDir, "secret.key")).length > 0, true, "the key is still there for the edge");
  t.equal(statSync(dataDir).mode & 0o777, 0o711, "the data directory is passable on the way to the adapters, not listable");
  for (const f of readdirSync(dataDir).filter((f) => f !== "adapters")) {
    const st = lstatSync(join(dataDir, f));
    if (!st.isSymbolicLink()) t.equal(st.mode & 0o077, 0, `${f}: nothing for group or others`);
  }
  const fds = await run(`for f in /proc/$$/fd/*; do readlink "$f"; done`);
  t.notOk(fds.output.includes(join(dataDir, "outpost.db")) || fds.output.includes("secret.key"), `no descriptor of the data directory is inherited: ${fds.output}`);
});

t.test("commands run as nobody in the adapter's own directory, and can use it", rootOnly, async (t) => {
  const name = uniq("who");
  const r = await run("id -u; id -g; id -G; pwd; touch state && echo wrote-state", name);
  t.equal(r.err, false, r.output);
  const [uid, gid, groups, pwd, wrote] = r.output.split("\n");
  t.equal(Number(uid), nobody!.uid, "id -u is nobody's uid");
  t.equal(Number(gid), nobody!.gid, "with nobody's group");
  t.equal(groups?.trim(), String(nobody!.gid), "and no group of the edge's");
  t.equal(pwd, join(adaptersDir, name), "the working directory is the adapter's");
  t.equal(wrote, "wrote-state", "the adapter can keep state in its directory");
  // a script of the adapter's with owner-only permissions still runs: the files are the adapter user's
  const c = await s.dev.post(`${base}/${name}/files`, { name: "run.sh", permissions: "0700", file: b64("#!/bin/sh\necho script-ran\n") });
  t.equal(c.status, 200, c.text);
  t.equal((await s.dev.put(`${base}/${name}`, { command: "start", file: "run.sh" })).status, 200);
  t.match((await s.dev.put(`${base}/${name}/control`, { command: "deploy", edges: [E1.name] })).body[E1.name], { err: false });
  const st = await s.dev.put(`${base}/${name}/control`, { command: "start", edges: [E1.name] });
  t.match(st.body[E1.name], { err: false, output: /script-ran/ }, st.text);
  t.equal(statSync(join(adaptersDir, name, "run.sh")).uid, nobody!.uid, "deployed files belong to the adapters user");
});

t.test("--adapters-user chooses the user; one that does not exist is an error, not root", { skip: rootOnly.skip || (other ? false : "no second unprivileged user in /etc/passwd") }, async (t) => {
  const e2 = await newEdge();
  let edge2: Outpost;
  try { edge2 = await startEdge(e2, ["--adapters-user", other!.name]); }
  catch (e) { t.fail(`the edge does not start with --adapters-user: ${String(e).slice(0, 600)}`); return; }
  const r = await runOn(e2.name, "id -u");
  t.equal(Number(r.output.trim()), other!.uid, `id -u is ${other!.name}'s uid (${other!.uid}): ${r.output}`);
  await edge2.stop();

  const edge3 = await startEdge(e2, ["--adapters-user", "no_such_user_here"], edge2.dataDir);
  const name = uniq("nouser");
  t.equal((await s.dev.post(base, { name, deploy_command: "id -u", run_deploy_on_deploy: true })).status, 200);
  const bad = (await s.dev.put(`${base}/${name}/control`, { command: "deploy", edges: [e2.name] })).body[e2.name];
  t.equal(bad?.err, true, "the deploy does not run");
  t.match(bad?.output, /no_such_user_here/, `the answer names the missing user: ${bad?.output}`);
  t.notMatch(bad?.output, /^0$/m, "and nothing ran as root");
  await edge3.stop();
});

t.test("a deploy never writes through a symbolic link, dangling or not", async (t) => {
  const outside = mkdtempSync(join(tmpdir(), "outside-"));
  const name = uniq("links");
  t.equal((await s.dev.post(base, { name })).status, 200);
  t.equal((await s.dev.post(`${base}/${name}/files`, { name: "a.txt", file: b64("first") })).status, 200);
  const home = join(adaptersDir, name);
  // the file reaches the edge through sync: a deploy before it arrives writes nothing yet
  t.ok(await waitFor(async () => {
    const r = await s.dev.put(`${base}/${name}/control`, { command: "deploy", edges: [E1.name] });
    return r.body[E1.name]?.err === false && existsSync(join(home, "a.txt")) && readFileSync(join(home, "a.txt"), "utf8") === "first";
  }, 10_000), "deployed");

  const deploy = async (files: [string, string][]) => {
    for (const [file, path] of files) {
      const r = await s.dev.post(`${base}/${name}/files`, { name: file, path_name: path, file: b64(`content of ${file}`) });
      if (r.status !== 200) throw new Error(r.text);
    }
    return (await s.dev.put(`${base}/${name}/control`, { command: "deploy", edges: [E1.name] })).body[E1.name];
  };

  // a dangling link in place of the file: following it would create the file where it points
  symlinkSync(join(outside, "made-by-deploy.txt"), join(home, "out.txt"));
  const r1 = await deploy([["out.txt", "out.txt"]]);
  t.match(r1, { err: true, output: /symbolic link/ }, "refused");
  t.notOk(existsSync(join(outside, "made-by-deploy.txt")), "nothing was made outside through the dangling link");
  t.ok(lstatSync(join(home, "out.txt")).isSymbolicLink(), "the link is left as it was");
  t.equal(readFileSync(join(home, "a.txt"), "utf8"), "first", "a refused deploy writes none of the files");
  t.equal((await s.dev.del(`${base}/${name}/files/out.txt`)).status, 200);

  // a dangling link in place of a directory on the way
  symlinkSync(join(outside, "nodir"), join(home, "sub"));
  t.match(await deploy([["deep.txt", "sub/deep.txt"]]), { err: true, output: /symbolic link/ }, "refused");
  t.notOk(existsSync(join(outside, "nodir")), "no directory was made outside");
  t.equal((await s.dev.del(`${base}/${name}/files/deep.txt`)).status, 200);

  // a link to a file that exists outside
  const victim = join(outside, "victim.txt");
  writeFileSync(victim, "untouched");
  symlinkSync(victim, join(home, "v.txt"));
  t.match(await deploy([["v.txt", "v.txt"]]), { err: true, output: /symbolic link/ }, "refused");
  t.equal(readFileSync(victim, "utf8"), "untouched", "the file outside is not written");
  t.equal((await s.dev.del(`${base}/${name}/files/v.txt`)).status, 200);

  // a link in place of the adapter's own directory
  const other2 = uniq("linked");
  mkdirSync(join(outside, "dir"));
  symlinkSync(join(outside, "dir"), join(adaptersDir, other2));
  t.equal((await s.dev.post(base, { name: other2 })).status, 200);
  t.equal((await s.dev.post(`${base}/${other2}/files`, { name: "x.txt", file: b64("x") })).status, 200);
  const r4 = (await s.dev.put(`${base}/${other2}/control`, { command: "deploy", edges: [E1.name] })).body[E1.name];
  t.match(r4, { err: true, output: /not a directory/ }, "refused");
  t.same(readdirSync(join(outside, "dir")), [], "nothing was written where the link points");
});

t.test("hostile requests to the adapter routes are refused", async (t) => {
  const name = uniq("hostile");
  t.equal((await s.dev.post(base, { name })).status, 200);
  t.equal((await s.dev.post(`${base}/${name}/files`, { name: "ok.sh", file: b64("x") })).status, 200);

  for (const bad of ["../x", "a/b", ".", "..", "x\u0000y", "a b", "-x", "x".repeat(200)])
    isErr(t, await s.dev.post(base, { name: bad }), 400, `adapter name ${JSON.stringify(bad.slice(0, 20))}`);
  for (const p of ["..%2F..%2Fetc", "%2e%2e", "x%00y"]) {
    isErr(t, await s.dev.get(`${base}/${p}`), 404, `GET adapter ${p}`);
    isErr(t, await s.dev.put(`${base}/${p}/control`, { command: "status", edges: [E1.name] }), 404, `control of adapter ${p}`);
    isErr(t, await s.dev.get(`${base}/${name}/files/${p}`), 404, `GET file ${p}`);
  }

  const file = (body: Record<string, unknown>) => s.dev.post(`${base}/${name}/files`, { name: "f.sh", file: b64("x"), ...body });
  for (const bad of ["../x.sh", "a/b.sh", "..", "x\u0000"]) isErr(t, await s.dev.post(`${base}/${name}/files`, { name: bad, file: b64("x") }), 400, `file name ${JSON.stringify(bad)}`);
  for (const p of ["../x", "a/../../x", "/etc/passwd", "..\\x", "a\\..\\..\\x", "C:\\x", "a\u0000b", ".", "./", "a/..", "a/../", "x".repeat(2000), `a/${"b".repeat(300)}`])
    isErr(t, await file({ path_name: p }), 400, `path_name ${JSON.stringify(p.slice(0, 30))}`);
  for (const [k, v] of [["owner", "--reference=/etc/shadow"], ["owner", "root;id"], ["group", "a b"], ["owner", "x".repeat(100)], ["permissions", "4755"], ["permissions", "07777"]] as [string, string][])
    isErr(t, await file({ [k]: v }), 400, `${k} ${JSON.stringify(v)}`);
  isErr(t, await file({ colour: "red" }), 400, "unknown file field");
  isErr(t, await s.dev.put(`${base}/${name}`, { colour: "red" }), 400, "unknown adapter field");
  isErr(t, await s.dev.put(`${base}/${name}/files/ok.sh`, { file: b64("y"), colour: "red" }), 400, "unknown field on overwrite");
  for (const body of [[1, 2], "text", 5]) isErr(t, await s.dev.post(`${base}/${name}/files`, body), 400, `body ${JSON.stringify(body)}`);
  isErr(t, await s.dev.put(`${base}/${name}/control`, { command: "status", edges: [E1.name], timeout: 10_000 }), 400, "a timeout past the limit");
  isErr(t, await s.dev.put(`${base}/${name}/control`, { command: "rm -rf /", edges: [E1.name] }), 400, "a command that is not one of the commands");

  // a body past the limit is refused before it is parsed (sent chunked, so the server reads it
  // and answers rather than closing on a declared length)
  const huge = JSON.stringify({ name: "big.bin", file: "A".repeat(33 * 1024 * 1024) });
  isErr(t, await request(platform.url, "POST", `${base}/${name}/files`, { headers: s.dev.headers, body: huge, chunked: true }), 413, "a body of 33 MB");
  t.same((await s.dev.get(`${base}/${name}/files`)).body.map((f: any) => f.name), ["ok.sh"], "none of these made a file");

  // another developer, and no token at all
  const stranger = await devWithSystem(platform, "stranger");
  for (const c of [stranger.dev, new Client(platform.url)]) {
    const r = await c.put(`${base}/${name}/control`, { command: "status", edges: [E1.name] });
    t.ok(r.status === 401 || r.status === 403, `control by someone else is refused (${r.status})`);
  }
});
