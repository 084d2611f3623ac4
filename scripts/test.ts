// The whole test suite: `npm test`.
//  1. builds the x64 binary if it is missing or older than the sources (black-box tests run it);
//  2. unit and in-process tests with `bun test` (test/unit);
//  3. black-box tests with tap on Node against the binary (test/e2e, bundled to .e2e-build first:
//     scripts/bundle-e2e.ts);
//  4. prints one closing line: `N passed, N failed, N skipped`; fails on failures only (and on skips
//     where OUTPOST_REQUIRE_SERVICES is set: there every optional server must be present).
// Arguments filter both suites by file path substring: `npm test -- users`.
// OUTPOST_TEST_DB=postgres runs the black-box tests' platforms on PostgreSQL (OUTPOST_TEST_PG, or
// the local test server), each in a database of its own; what the run leaves is dropped at its end.
import { existsSync, readdirSync, rmSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { bundleE2E } from "./bundle-e2e.ts";
import { RUNTIME_ENV } from "../src/runtimeOptions.ts";

const ROOT = resolve(import.meta.dir, "..");
// OUTPOST_BIN runs the suites against another binary (a copy, so a rebuild cannot swap it mid-run).
// (a relative path is taken from the directory the runner started in: the tests spawn it from others)
const BIN = process.env.OUTPOST_BIN ? resolve(process.env.OUTPOST_BIN) : join(ROOT, "dist/outpost-linux-x64");
const filters = process.argv.slice(2).filter((a) => !a.startsWith("-"));
const only = new Set(process.argv.slice(2).filter((a) => a === "--unit" || a === "--e2e"));
const match = (f: string) => filters.length === 0 || filters.some((x) => f.includes(x));

function newestMtime(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return t;
}

function files(dir: string, suffix: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...files(p, suffix));
    else if (e.name.endsWith(suffix)) out.push(p);
  }
  return out.sort();
}

async function run(cmd: string[], env: Record<string, string> = {}): Promise<{ code: number; out: string }> {
  const p = Bun.spawn(cmd, { cwd: ROOT, env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" });
  let out = "";
  const pump = async (s: ReadableStream<Uint8Array>, to: NodeJS.WriteStream) => {
    const dec = new TextDecoder();
    for await (const chunk of s) { const t = dec.decode(chunk); out += t; to.write(t); }
  };
  await Promise.all([pump(p.stdout, process.stdout), pump(p.stderr, process.stderr)]);
  return { code: await p.exited, out };
}

let passed = 0, failed = 0, skipped = 0, ran = 0;
// what failed, repeated at the end: a CI log is often read from its tail only
const failures: string[] = [];
function collectFailures(out: string, start: RegExp, context: number) {
  const lines = out.split("\n");
  lines.forEach((l, i) => { if (start.test(l)) failures.push(lines.slice(i, i + context + 1).join("\n")); });
}

// 1. binary
if (!process.env.OUTPOST_BIN && (!existsSync(BIN) || statSync(BIN).mtimeMs < Math.max(newestMtime(join(ROOT, "src")), statSync(join(ROOT, "package.json")).mtimeMs))) {
  const b = await run([process.execPath, join(ROOT, "scripts/build.ts")]);
  if (b.code !== 0) { console.log("0 passed, 1 failed, 0 skipped"); process.exit(1); }
}

// 2. unit tests
const unit = files(join(ROOT, "test/unit"), ".test.ts").filter(match);
if (unit.length && !only.has("--e2e")) {
  // the JavaScriptCore options the binary runs with (src/runtimeOptions.ts): code services run as
  // they do there
  const r = await run([process.execPath, "test", ...unit.map((f) => "./" + f.slice(ROOT.length + 1))], RUNTIME_ENV);
  const count = (what: string) => Number(new RegExp(`^\\s*(\\d+) ${what}$`, "m").exec(r.out)?.[1] ?? 0);
  passed += count("pass");
  failed += count("fail");
  skipped += count("skip") + count("todo");
  if (r.code !== 0 && count("fail") === 0) failed += 1; // crashed before reporting
  collectFailures(r.out, /^\(fail\) /, 0);
  ran++;
}

// 3. black-box tests
const e2e = files(join(ROOT, "test/e2e"), ".test.ts").filter(match);
if (e2e.length && !only.has("--unit")) {
  // one directory per run, so two runs at once do not delete each other's bundles
  const outdir = join(ROOT, ".e2e-build", String(process.pid));
  rmSync(outdir, { recursive: true, force: true });
  const built = await bundleE2E(e2e, outdir, join(ROOT, "test/e2e"));
  if (!built.ok) {
    for (const l of built.logs) console.error(l);
    failures.push("the black-box tests do not compile (above)");
    failed += 1;
  } else {
    const tests = e2e.map((f) => join(outdir, f.slice(join(ROOT, "test/e2e").length + 1).replace(/\.ts$/, ".mjs")));
    if (process.env.OUTPOST_TEST_DB === "postgres") console.log("black-box platforms store their data in PostgreSQL (OUTPOST_TEST_DB=postgres)");
    // every Node process of the run (tap's runner, each file) ends at its 'exit' event: test/node-exit.mjs
    const endAtExit = `--import=${pathToFileURL(join(ROOT, "test/node-exit.mjs"))}`;
    const r = await run(["node", endAtExit, join(ROOT, "node_modules/tap/dist/esm/run.mjs"), `--node-arg=${endAtExit}`, ...tests], { OUTPOST_BIN: BIN, OUTPOST_TEST_RUN: String(process.pid) });
    if (process.env.OUTPOST_TEST_DB === "postgres") await dropRunDatabases();
    // tap's closing summary: `# { total: N, pass: N, fail: N, skip: N, todo: N }` (zeros left out)
    const sum = /^# \{ (total: \d+[^}]*)\}/m.exec(r.out)?.[1];
    const count = (what: string) => Number(new RegExp(`\\b${what}: (\\d+)`).exec(sum ?? "")?.[1] ?? 0);
    if (sum) {
      passed += count("pass");
      failed += count("fail");
      skipped += count("skip") + count("todo");
    } else failed += 1;
    if (r.code !== 0 && sum && count("fail") === 0) failed += 1; // a file that died outside its tests
    // a failed assertion with its diagnostics (tap's YAML block follows the line)
    collectFailures(r.out, /^\s*not ok \d+/, 12);
    ran++;
    rmSync(outdir, { recursive: true, force: true });
  }
}

/** The PostgreSQL databases this run's platforms left (kept data directories, killed tests). */
async function dropRunDatabases() {
  const { PG_TEST_URL } = await import("../test/pgdb.ts");
  const { default: pg } = await import("pg");
  const c = new pg.Client({ connectionString: PG_TEST_URL });
  try {
    await c.connect();
    const left = await c.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname LIKE $1`, [`outpost\\_e2e\\_${process.pid}\\_%`]);
    for (const { datname } of left.rows) await c.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
  } catch (e) { console.log(`could not drop this run's test databases: ${(e as Error).message}`); }
  finally { await c.end().catch(() => {}); }
}

if (failures.length) console.log(`\nFailures:\n${failures.join("\n")}`);
console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped`);
const skipsFail = skipped > 0 && !!process.env.OUTPOST_REQUIRE_SERVICES;
if (skipsFail) console.log("skipped tests fail here: OUTPOST_REQUIRE_SERVICES is set, so every server they need must be present");
process.exit(failed > 0 || skipsFail || ran === 0 || passed === 0 ? 1 : 0);
