// Builds the single-binary executables.
//   bun scripts/build.ts            -> dist/outpost-linux-x64
//   bun scripts/build.ts --arm64    -> dist/outpost-linux-arm64 (runtime and addon from npm, see vendorArm64)
//   bun scripts/build.ts --baseline -> dist/outpost-linux-x64-baseline (x64 without AVX2; runtime from npm)
//   bun scripts/build.ts --all      -> all three
//   bun scripts/build.ts --out F    -> the x64 binary at F (a private copy, e.g. for a second test run)
// Every binary is stamped with its version and commit (src/version.ts): package.json's version
// and `git rev-parse --short HEAD` (with "-dirty" when tracked files differ from it), or
// OUTPOST_VERSION and OUTPOST_COMMIT when set (a release pipeline, a build outside git).
// libsql loads its native addon with a dynamic require the bundler cannot follow; the plugin
// below embeds the .node file in the binary and routes that require to src/store/native.ts,
// which picks a directory the addon can be loaded from (a noexec /tmp cannot).
import type { BunPlugin } from "bun";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { buildConsole, type ConsoleFiles } from "../src/console/build.ts";
import { writeInPages } from "../src/store/native.ts";
import { buildStamp } from "./stamp.ts";

const ROOT = resolve(import.meta.dir, "..");
const BUN_VERSION = Bun.version;
const STAMP = buildStamp();
console.log(`stamping ${STAMP.version} (commit ${STAMP.commit})`);
const LIBSQL_VERSION = (await Bun.file(join(ROOT, "node_modules/libsql/package.json")).json()).version as string;

/** src/version.ts with the build's version and commit in place of package.json's and "source". */
function stampedVersion(stamp: { version: string; commit: string }): BunPlugin {
  return {
    name: "stamped-version",
    setup(build) {
      build.onLoad({ filter: /[\\/]src[\\/]version\.ts$/ }, () => ({
        contents: `export const VERSION = ${JSON.stringify(stamp.version)};\nexport const COMMIT = ${JSON.stringify(stamp.commit)};\n` +
          `export const BUILD = ${JSON.stringify(`${stamp.version} (commit ${stamp.commit})`)};\n`,
        loader: "ts",
      }));
    },
  };
}

/** The addon compressed with zstd (10 MB of the binary become 3.2 MB; a start decompresses it, in
 *  about 20 ms, only when it writes the addon out, the first start of a version), with the size
 *  and hash of what it decompresses to. Compressed once per build run. */
const compressedAddons = new Map<string, Promise<{ file: string; size: number; hash: string }>>();
const addonDir = mkdtempSync(join(tmpdir(), "outpost-addon-"));
process.on("exit", () => rmSync(addonDir, { recursive: true, force: true }));
function compressedAddon(path: string) {
  let c = compressedAddons.get(path);
  if (!c) {
    c = (async () => {
      const raw = await Bun.file(path).bytes();
      const file = join(addonDir, `libsql-${compressedAddons.size}.node.zst`);
      await Bun.write(file, Bun.zstdCompressSync(raw, { level: 19 }));
      return { file, size: raw.length, hash: Bun.hash(raw).toString(16) };
    })();
    compressedAddons.set(path, c);
  }
  return c;
}

function libsqlStaticNative(nativeSpec: string): BunPlugin {
  const addonPath = nativeSpec.startsWith("/") ? nativeSpec : join(ROOT, "node_modules", nativeSpec, "index.node");
  return {
    name: "libsql-static-native",
    setup(build) {
      build.onLoad({ filter: /[\\/]node_modules[\\/]libsql[\\/](index|promise)\.js$/ }, async (args) => {
        const src = await Bun.file(args.path).text();
        const out = src.replace("require(`@libsql/${target}`)", `require("outpost:libsql-addon").default`);
        if (out === src) throw new Error("libsql-static-native: pattern not found in " + args.path + " (libsql changed?)");
        return { contents: out, loader: "js" };
      });
      build.onResolve({ filter: /^outpost:libsql-addon$/ }, () => ({ path: "libsql-addon", namespace: "outpost" }));
      build.onLoad({ filter: /^libsql-addon$/, namespace: "outpost" }, async () => {
        const addon = await compressedAddon(addonPath);
        return {
          contents: `import addon from ${JSON.stringify(addon.file)} with { type: "file" };\n` +
            `import { loadLibsqlAddon } from ${JSON.stringify(join(ROOT, "src/store/native.ts"))};\n` +
            `export default loadLibsqlAddon(addon, ${addon.size}, ${JSON.stringify(addon.hash)});\n`,
          loader: "ts",
        };
      });
    },
  };
}

/** The web console built once and carried as text: this module replaces src/console/assets.ts,
 *  which builds it from source at run time. */
function embeddedConsole(files: ConsoleFiles): BunPlugin {
  return {
    name: "embedded-console",
    setup(build) {
      build.onLoad({ filter: /[\\/]src[\\/]console[\\/]assets\.ts$/ }, () => ({
        // as ASCII (\u escapes): a character beyond it would make Bun keep the bundle as UTF-16 (asciiSources)
        contents: `const FILES = ${JSON.stringify(files).replace(/[^\x00-\x7f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)};\nexport const consoleAssets = async () => FILES;\n`, loader: "ts",
      }));
    },
  };
}

/** SQL Server's driver signs in to Azure AD and reads Azure Key Vault through the Azure SDK (about
 *  1.2 MB of code, a fifth of the bundle). Outpost's SQL Server connections sign in with a user
 *  and password, so these modules are left out: what tedious would call there refuses. */
function withoutAzureSdk(): BunPlugin {
  const refuse = `function refuse(){throw new Error("Azure AD and Key Vault sign-in are not available in Outpost: use a SQL login (user and password)")}`;
  return {
    name: "without-azure-sdk",
    setup(build) {
      build.onResolve({ filter: /^@azure\/(identity|keyvault-keys|core-auth)$/ }, (args) => ({ path: args.path, namespace: "azure-sdk-left-out" }));
      build.onLoad({ filter: /.*/, namespace: "azure-sdk-left-out" }, () => ({
        contents: `${refuse}
class Refused { constructor() { refuse(); } }
module.exports = { isTokenCredential: () => false, ClientSecretCredential: Refused, UsernamePasswordCredential: Refused,
  ManagedIdentityCredential: Refused, DefaultAzureCredential: Refused, KeyClient: Refused, CryptographyClient: Refused };`,
        loader: "js",
      }));
    },
  };
}

/** readable-stream is Node's streams copied into a package for older Node versions; mqtt-packet's
 *  parser reaches it (through bl), and with it every MQTT connection. The runtime's own node:stream
 *  is the same code and is loaded anyway (node:http uses it): given it instead, a start no longer
 *  evaluates a second copy (about 10 ms of a cold start, and its memory). */
function runtimeStreams(): BunPlugin {
  return {
    name: "runtime-streams",
    setup(build) {
      build.onResolve({ filter: /^readable-stream$/ }, () => ({ path: "node:stream", external: true }));
    },
  };
}

/** Bun keeps a bundle that holds any character beyond ASCII as UTF-16 in the executable, twice its
 *  size (one copyright comment of @js-joda/core, kept as a legal comment, cost 4.5 MB). The
 *  packages' sources are given to the bundler with such characters as \u escapes, which mean the
 *  same in strings, regular expressions, identifiers and comments. */
function asciiSources(): BunPlugin {
  return {
    name: "ascii-sources",
    setup(build) {
      build.onLoad({ filter: /[\\/]node_modules[\\/].+\.[cm]?js$/ }, async (args) => {
        const src = await Bun.file(args.path).text();
        if (!/[^\x00-\x7f]/.test(src)) return undefined; // the bundler reads it itself
        // (a character escaped in the source, "\é", is the character: its backslash goes)
        const contents = src.replace(/(\\*)([^\x00-\x7f])/g, (_, slashes: string, c: string) =>
          slashes.slice(slashes.length % 2) + "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
        return { contents, loader: "js" };
      });
    },
  };
}

/** Another target's packages from npm, in a folder of their own (kept out of the app's own
 *  dependencies): `npm install --force`, as npm refuses a foreign CPU otherwise. */
async function vendor(folder: string, packages: string[], files: string[]): Promise<string[]> {
  const dir = join(ROOT, folder);
  const paths = files.map((f) => join(dir, "node_modules", f));
  if (!paths.every((p) => existsSync(p))) {
    mkdirSync(dir, { recursive: true });
    await Bun.write(join(dir, "package.json"), JSON.stringify({ name: `outpost-${folder}`, private: true }));
    const p = Bun.spawnSync(["npm", "install", "--force", "--no-save", "--ignore-scripts", "--no-audit", "--no-fund", ...packages],
      { cwd: dir, stdout: "inherit", stderr: "inherit" });
    if (p.exitCode !== 0 || !paths.every((f) => existsSync(f))) throw new Error(`could not install ${packages.join(", ")} from npm`);
  }
  return paths;
}

/** The arm64 Bun runtime and libsql addon. */
async function vendorArm64(): Promise<{ bun: string; addon: string }> {
  const [bun, addon] = await vendor("vendor-arm64", [`@oven/bun-linux-aarch64@${BUN_VERSION}`, `@libsql/linux-arm64-gnu@${LIBSQL_VERSION}`],
    ["@oven/bun-linux-aarch64/bin/bun", "@libsql/linux-arm64-gnu/index.node"]);
  return { bun: bun!, addon: addon! };
}

type Target = "bun-linux-x64" | "bun-linux-x64-baseline" | "bun-linux-arm64";

async function build(target: Target, outfile: string, order: string[]) {
  outfile = resolve(ROOT, outfile);
  const t0 = performance.now();
  await compile(target, outfile, order);
  console.log(`built ${outfile} (${target}) in ${Math.round(performance.now() - t0)} ms`);
}

async function compile(target: Target, outfile: string, order: string[]) {
  let nativeSpec = "@libsql/linux-x64-gnu";
  let executablePath: string | undefined;
  if (target === "bun-linux-arm64") {
    const v = await vendorArm64();
    nativeSpec = v.addon;
    executablePath = v.bun;
  } else if (target === "bun-linux-x64-baseline") {
    // x64 CPUs without AVX2 (older Atom and Celeron gateways): Bun's baseline runtime, from npm as
    // arm64's is; the libsql addon is the x64 one, built for baseline x86-64
    [executablePath] = await vendor("vendor-x64-baseline", [`@oven/bun-linux-x64-baseline@${BUN_VERSION}`], ["@oven/bun-linux-x64-baseline/bin/bun"]);
  }
  const res = await Bun.build({
    // the code worker and the compile check's worker are entries of their own: their threads
    // load them from the binary, as /$bunfs/root/code/<name>.ts under this root (src/code/pool.ts,
    // src/code/syntax.ts)
    entrypoints: [join(ROOT, "src/main.ts"), join(ROOT, "src/code/worker.ts"), join(ROOT, "src/code/compileWorker.ts")],
    root: join(ROOT, "src"),
    plugins: [libsqlStaticNative(nativeSpec), embeddedConsole(await buildConsole()), asciiSources(), withoutAzureSdk(), runtimeStreams(), stampedVersion(STAMP)],
    minify: true,
    // Size (target: under 125 MB): Bun's runtime is 107 MB of it and libSQL's addon 3.2 MB
    // (compressed, see compressedAddon), so the code has about 10 MB. Bytecode of each module's
    // top-level code only (depth 0: functions are compiled from their source when first
    // called), 1.4 MB, laid out in the order a start runs
    // it (startProfiles): a cold start's median went from 317 to 158 ms for 1 MB more resident
    // in an idle edge. Bytecode of every function would be 14 MB more (138 MB). No embedded
    // source map (5 MB: stack traces point into the minified code).
    bytecode: true,
    bytecodeDepth: 0,
    sourcemap: "none",
    format: "esm",
    // what is loaded with import() (the external-database drivers, libSQL, PostgreSQL) is a chunk
    // of its own, read and compiled only when used: a start reads a third of the code
    splitting: true,
    compile: {
      target, outfile, autoloadDotenv: false, autoloadBunfig: false,
      // The JIT a hundred times more reluctant until the node is up (src/cli/main.ts sets it back):
      // a start's run-once code stays in the interpreter. An idle edge went from 71-73 to 62-64
      // MB resident (what a start compiled, and the compilers' code paged in for it), and a cold
      // start's median from 177 to 144 ms.
      jitPolicy: 100, ...(executablePath ? { executablePath } : {}),
      ...(order.length ? { bytecodeOrder: order } : {}),
    },
  } as Parameters<typeof Bun.build>[0]);
  if (!res.success) {
    for (const l of res.logs) console.error(l);
    process.exit(1);
  }
  writtenInPages(outfile);
}

/** The file written again 4 KB at a time (writeInPages, src/store/native.ts): a binary started
 *  straight after it was built, from the large pieces Bun wrote, held 4 MB more of its code
 *  resident than one read from the disk. */
function writtenInPages(file: string) {
  const bytes = readFileSync(file), part = `${file}.part`;
  const fd = openSync(part, "w", statSync(file).mode);
  try { writeInPages(fd, bytes); } finally { closeSync(fd); }
  renameSync(part, file);
}

/** A port nothing listens on now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  const { port } = server.address() as AddressInfo;
  await new Promise((ok) => server.close(ok));
  return port;
}

/** The functions a start runs, recorded (BUN_BYTECODE_ORDER_OUT) by this code built for this
 *  machine and started as an edge and as a platform until /health answers; every target's
 *  bytecode is laid out in that order (the profile names functions, not addresses). An empty list
 *  when it cannot be recorded here: the binaries then work the same and start slower. */
async function startProfiles(dir: string): Promise<string[]> {
  const host: Target | null = process.platform !== "linux" ? null : process.arch === "x64" ? "bun-linux-x64" : process.arch === "arm64" ? "bun-linux-arm64" : null;
  if (!host) return [];
  const bin = join(dir, "outpost");
  await compile(host, bin, []);
  const edge = ["--mode", "edge", "--platform-url", `http://127.0.0.1:${await freePort()}`, "--system-key", "0".repeat(30), "--edge-name", "profile", "--edge-token", "profile-token"];
  const out: string[] = [];
  // the way gateways start first: it decides what goes first
  for (const [name, args] of [["edge", edge], ["platform", []]] as const) {
    const file = join(dir, `${name}.order`), data = join(dir, name);
    mkdirSync(data);
    const httpPort = await freePort();
    const p = Bun.spawn([bin, "--data-dir", data, "--http-port", String(httpPort), "--mqtt-port", String(await freePort()), "--mqtt-ws-port", String(await freePort()), "--log-level", "error", ...args],
      { cwd: data, env: { ...process.env, BUN_BYTECODE_ORDER_OUT: file }, stdout: "ignore", stderr: "inherit" });
    for (const end = Date.now() + 20_000; Date.now() < end && p.exitCode === null;) {
      try { if ((await fetch(`http://127.0.0.1:${httpPort}/health`)).status < 500) break; } catch { /* not up yet */ }
      await Bun.sleep(20);
    }
    p.kill("SIGTERM");
    await p.exited;
    if (existsSync(file)) out.push(file);
    else console.warn(`build: no start profile of the ${name} (it exited with ${p.exitCode}); its start is not laid out`);
  }
  return out;
}

const argv = process.argv.slice(2);
const args = new Set(argv);
const out = argv.includes("--out") ? argv[argv.indexOf("--out") + 1] : undefined;
mkdirSync(join(ROOT, "dist"), { recursive: true });
const profiles = mkdtempSync(join(tmpdir(), "outpost-start-profile-"));
process.on("exit", () => rmSync(profiles, { recursive: true, force: true }));
const order = await startProfiles(profiles);
if (out) await build("bun-linux-x64", out, order);
else if ((!args.has("--arm64") && !args.has("--baseline")) || args.has("--all")) await build("bun-linux-x64", "dist/outpost-linux-x64", order);
if (args.has("--arm64") || args.has("--all")) await build("bun-linux-arm64", "dist/outpost-linux-arm64", order);
if (args.has("--baseline") || args.has("--all")) await build("bun-linux-x64-baseline", "dist/outpost-linux-x64-baseline", order);
