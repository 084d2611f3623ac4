// Builds the single-binary executables (reference/toolchain.md §1, §2).
//   bun scripts/build.ts            -> dist/outpost-linux-x64
//   bun scripts/build.ts --arm64    -> dist/outpost-linux-arm64 (runtime and addon from npm, see vendorArm64)
//   bun scripts/build.ts --baseline -> dist/outpost-linux-x64-baseline (x64 without AVX2; runtime from npm)
//   bun scripts/build.ts --all      -> all three
//   bun scripts/build.ts --out F    -> the x64 binary at F (a private copy, e.g. for a second test run)
// libsql loads its native addon with a dynamic require the bundler cannot follow; the plugin
// below embeds the .node file in the binary and routes that require to src/store/native.ts,
// which picks a directory the addon can be loaded from (a noexec /tmp cannot).
import type { BunPlugin } from "bun";
import { existsSync, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { buildConsole, type ConsoleFiles } from "../src/console/build.ts";

const ROOT = resolve(import.meta.dir, "..");
const BUN_VERSION = Bun.version;
const LIBSQL_VERSION = (await Bun.file(join(ROOT, "node_modules/libsql/package.json")).json()).version as string;

function libsqlStaticNative(nativeSpec: string): BunPlugin {
  const addon = nativeSpec.startsWith("/") ? nativeSpec : join(ROOT, "node_modules", nativeSpec, "index.node");
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
      build.onLoad({ filter: /^libsql-addon$/, namespace: "outpost" }, () => ({
        contents: `import addon from ${JSON.stringify(addon)} with { type: "file" };\n` +
          `import { loadLibsqlAddon } from ${JSON.stringify(join(ROOT, "src/store/native.ts"))};\n` +
          `export default loadLibsqlAddon(addon);\n`,
        loader: "ts",
      }));
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
        contents: `const FILES = ${JSON.stringify(files)};\nexport const consoleAssets = async () => FILES;\n`, loader: "ts",
      }));
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

async function build(target: Target, outfile: string) {
  outfile = resolve(ROOT, outfile);
  const t0 = performance.now();
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
    // the code worker is an entry of its own: its threads load it from the binary, as
    // /$bunfs/root/code/worker.ts under this root (src/code/pool.ts)
    entrypoints: [join(ROOT, "src/main.ts"), join(ROOT, "src/code/worker.ts")],
    root: join(ROOT, "src"),
    plugins: [libsqlStaticNative(nativeSpec), embeddedConsole(await buildConsole()), asciiSources()],
    minify: true,
    // Size (target: under 125 MB): Bun's runtime is 107 MB of it and libSQL's addon 10 MB, so the
    // code has about 8 MB. No bytecode (it was 14 MB, three times the code it compiles; a cold
    // start parses the code instead, a third of it since splitting) and no embedded source map
    // (5 MB: stack traces point into the minified code). Measured again with splitting: bytecode
    // halves a cold start (median 428 -> 209 ms) but adds 14.3 MB (138.4 MB) and 5.4 MB of
    // resident file pages to an idle edge; Bun compiles every chunk or none, so it cannot be had
    // for the entry chunk alone (its bytecode would be about 3 MB, past what the target leaves).
    bytecode: false,
    sourcemap: "none",
    format: "esm",
    // what is loaded with import() (the external-database drivers, libSQL, PostgreSQL) is a chunk
    // of its own, read and compiled only when used: a start reads a third of the code
    splitting: true,
    compile: { target, outfile, autoloadDotenv: false, autoloadBunfig: false, ...(executablePath ? { executablePath } : {}) },
  } as Parameters<typeof Bun.build>[0]);
  if (!res.success) {
    for (const l of res.logs) console.error(l);
    process.exit(1);
  }
  console.log(`built ${outfile} (${target}) in ${Math.round(performance.now() - t0)} ms`);
}

const argv = process.argv.slice(2);
const args = new Set(argv);
const out = argv.includes("--out") ? argv[argv.indexOf("--out") + 1] : undefined;
mkdirSync(join(ROOT, "dist"), { recursive: true });
if (out) await build("bun-linux-x64", out);
else if ((!args.has("--arm64") && !args.has("--baseline")) || args.has("--all")) await build("bun-linux-x64", "dist/outpost-linux-x64");
if (args.has("--arm64") || args.has("--all")) await build("bun-linux-arm64", "dist/outpost-linux-arm64");
if (args.has("--baseline") || args.has("--all")) await build("bun-linux-x64-baseline", "dist/outpost-linux-x64-baseline");
