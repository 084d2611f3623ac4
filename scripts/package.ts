// Packages for gateways: `npm run package` -> for amd64, arm64 and amd64-baseline (x64 CPUs without
// AVX2: the same package with the baseline binary), a .deb (made with dpkg-deb) and a tarball with
// the same parts and an install.sh for systems without dpkg. Both install the
// binary, the systemd unit (packaging/outpost.service), the settings file /etc/outpost/outpost.toml
// and the service's user (packaging/sysusers.conf), with the copyright (packaging/copyright and
// copyright-licenses, and a stanza per embedded npm package from package-lock.json) and the
// changelog (packaging/changelog). The version is the one the binary is stamped with
// (scripts/stamp.ts: package.json's, or OUTPOST_VERSION); a version the changelog has no entry
// for gets one naming the commit.
//   bun scripts/package.ts                       all three, from dist/ (built when missing)
//   bun scripts/package.ts --arch amd64 --bin F  one, from the binary F
//   --out DIR (dist/), --compress xz|gzip|none (xz)
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { gzipSync } from "node:zlib";
import { buildStamp } from "./stamp.ts";

const ROOT = resolve(import.meta.dir, "..");
const PKG = join(ROOT, "packaging");
const { version: VERSION, commit: COMMIT } = buildStamp();
/** Per flavour: the Debian architecture and the binary in dist/. */
const ARCHES = {
  amd64: { deb: "amd64", bin: "outpost-linux-x64" },
  arm64: { deb: "arm64", bin: "outpost-linux-arm64" },
  "amd64-baseline": { deb: "amd64", bin: "outpost-linux-x64-baseline" },
} as const;
type Arch = keyof typeof ARCHES;

const argv = process.argv.slice(2);
const opt = (name: string) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
const only = opt("--arch") as Arch | undefined;
if (only && !(only in ARCHES)) throw new Error(`--arch: ${Object.keys(ARCHES).join(", ")}, not ${only}`);
const binOpt = opt("--bin");
if (binOpt && !only) throw new Error("--bin goes with --arch");
const out = resolve(opt("--out") ?? join(ROOT, "dist"));
const compress = opt("--compress") ?? "xz";
if (!["xz", "gzip", "none"].includes(compress)) throw new Error(`--compress: xz, gzip or none, not ${compress}`);

function run(cmd: string[], cwd?: string) {
  // xz on every core (tar's is single-threaded otherwise): a 140 MB binary takes minutes
  const p = Bun.spawnSync(cmd, { cwd, stdout: "inherit", stderr: "inherit", env: { ...process.env, XZ_OPT: "-T0" } });
  if (p.exitCode !== 0) throw new Error(`${cmd.join(" ")} failed (${p.exitCode})`);
}

/** The oldest glibc the binary runs on: the newest GLIBC_2.x symbol version it (with the
 *  embedded engine) refers to. */
function glibcOf(bin: string): string {
  let max = 17;
  for (const m of readFileSync(bin).toString("latin1").matchAll(/GLIBC_2\.(\d+)/g)) max = Math.max(max, Number(m[1]));
  return `2.${max}`;
}

function put(from: string, to: string, mode: number) {
  mkdirSync(join(to, ".."), { recursive: true });
  copyFileSync(from, to);
  chmodSync(to, mode);
}

/** The Debian changelog: packaging/changelog, with an entry for this version on top when it has
 *  none (a build between releases). */
function changelog(version: string, commit: string, now = new Date()): string {
  const text = readFileSync(join(PKG, "changelog"), "utf8");
  const top = /^outpost \(([^)]+)\)/.exec(text)?.[1];
  if (top === version) return text;
  const date = now.toUTCString().replace(/GMT$/, "+0000");
  return `outpost (${version}) unstable; urgency=medium\n\n  * Built from commit ${commit}.\n\n -- Outpost developers <outpost@localhost>  ${date}\n\n${text}`;
}

/** The copyright file: packaging/copyright, a stanza per npm package the binary embeds (those
 *  package-lock.json reaches from the dependencies, grouped by licence), then the text of every
 *  licence named. A licence without a text in copyright-licenses stops the packaging. */
function copyright(): string {
  const head = readFileSync(join(PKG, "copyright"), "utf8").trimEnd();
  const texts = readFileSync(join(PKG, "copyright-licenses"), "utf8").trimEnd();
  const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as { packages: Record<string, { version?: string; license?: string; dependencies?: Record<string, string>; optionalDependencies?: Record<string, string> }> };
  const pk = lock.packages;
  // a dependency is found as Node finds it: in the nearest node_modules going up
  const resolveDep = (from: string, name: string): string | null => {
    for (let dir = from; ;) {
      const p = `${dir ? `${dir}/` : ""}node_modules/${name}`;
      if (pk[p]) return p;
      if (!dir) return null;
      const i = dir.lastIndexOf("/node_modules/");
      dir = i < 0 ? "" : dir.slice(0, i);
    }
  };
  const seen = new Set<string>();
  const walk = (path: string) => {
    if (seen.has(path)) return;
    seen.add(path);
    const p = pk[path]!;
    for (const d of Object.keys({ ...p.dependencies, ...p.optionalDependencies })) { const r = resolveDep(path, d); if (r) walk(r); }
  };
  for (const d of Object.keys(pk[""]!.dependencies ?? {})) { const r = resolveDep("", d); if (r) walk(r); }
  const byLicense = new Map<string, string[]>();
  for (const path of [...seen].sort()) {
    const name = path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length);
    const license = pk[path]!.license;
    if (!license) throw new Error(`${name}: package-lock.json names no licence; add it to packaging/copyright by hand`);
    const list = byLicense.get(license) ?? byLicense.set(license, []).get(license)!;
    list.push(`embedded/node_modules/${name}`);
  }
  const stanzas = [...byLicense].map(([license, files]) =>
    `Files: ${files.join("\n ")}\nCopyright: the authors of each package (named in its package.json and licence file)\nLicense: ${license}`);
  const all = `${head}\n\n${stanzas.join("\n\n")}\n\n${texts}\n`;
  // every licence a stanza names has its text, in a stanza of its own or below
  const named = new Set([...all.matchAll(/^License: (.+)$/gm)].flatMap((m) => m[1]!.split(/ and | or /).map((x) => x.replace(/[()]/g, "").trim())));
  const given = new Set([...all.matchAll(/^License: (\S+)\n /gm)].map((m) => m[1]!));
  const missing = [...named].filter((l) => !given.has(l));
  if (missing.length) throw new Error(`no licence text for ${missing.join(", ")}: add it to packaging/copyright-licenses`);
  return all;
}

/** The documentation a package installs under /usr/share/doc/outpost. */
function docs(dir: string) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "copyright"), copyright(), { mode: 0o644 });
  writeFileSync(join(dir, "changelog.Debian.gz"), gzipSync(changelog(VERSION, COMMIT), { level: 9 }), { mode: 0o644 });
}

function deb(arch: Arch, bin: string): string {
  const stage = mkdtempSync(join(tmpdir(), "outpost-deb-"));
  chmodSync(stage, 0o755); // the package's "./": never a 0700 root
  try {
    put(bin, join(stage, "usr/bin/outpost"), 0o755);
    put(join(PKG, "outpost.service"), join(stage, "usr/lib/systemd/system/outpost.service"), 0o644);
    put(join(PKG, "sysusers.conf"), join(stage, "usr/lib/sysusers.d/outpost.conf"), 0o644);
    put(join(PKG, "outpost.toml"), join(stage, "etc/outpost/outpost.toml"), 0o640);
    for (const s of ["preinst", "postinst", "prerm", "postrm"]) put(join(PKG, "deb", s), join(stage, "DEBIAN", s), 0o755);
    docs(join(stage, "usr/share/doc/outpost"));
    writeFileSync(join(stage, "DEBIAN/conffiles"), "/etc/outpost/outpost.toml\n");
    const kib = Math.ceil(statSync(bin).size / 1024) + 16;
    writeFileSync(join(stage, "DEBIAN/control"), [
      "Package: outpost",
      `Version: ${VERSION}`,
      `Architecture: ${ARCHES[arch].deb}`,
      "Maintainer: Outpost developers <outpost@localhost>",
      `Installed-Size: ${kib}`,
      `Depends: libc6 (>= ${glibcOf(bin)})`,
      "Section: net",
      "Priority: optional",
      "Description: IoT platform and edge gateway in one binary",
      " Outpost serves a ClearBlade-compatible HTTP API, an MQTT broker and a sandboxed",
      " code engine on an embedded database. On a gateway it runs as an edge that keeps",
      " working offline and stays in sync with its platform.",
      "",
    ].join("\n"));
    const file = join(out, `outpost_${VERSION}_${arch}.deb`);
    run(["dpkg-deb", "--root-owner-group", `-Z${compress}`, "--build", stage, file]);
    return file;
  } finally { rmSync(stage, { recursive: true, force: true }); }
}

function tarball(arch: Arch, bin: string): string {
  const stage = mkdtempSync(join(tmpdir(), "outpost-tar-"));
  const name = `outpost-${VERSION}-linux-${arch}`;
  try {
    const d = join(stage, name);
    put(bin, join(d, "outpost"), 0o755);
    put(join(PKG, "outpost.service"), join(d, "outpost.service"), 0o644);
    put(join(PKG, "sysusers.conf"), join(d, "sysusers.conf"), 0o644);
    put(join(PKG, "outpost.toml"), join(d, "outpost.toml"), 0o644);
    put(join(PKG, "install.sh"), join(d, "install.sh"), 0o755);
    docs(d);
    const file = join(out, `${name}.tar.${compress === "none" ? "" : compress === "xz" ? "xz" : "gz"}`.replace(/\.$/, ""));
    const flag = compress === "xz" ? ["-J"] : compress === "gzip" ? ["-z"] : [];
    run(["tar", "--owner=0", "--group=0", "--numeric-owner", ...flag, "-cf", file, name], stage);
    return file;
  } finally { rmSync(stage, { recursive: true, force: true }); }
}

mkdirSync(out, { recursive: true });
const arches = only ? [only] : (Object.keys(ARCHES) as Arch[]);
if (!binOpt && arches.some((a) => !existsSync(join(ROOT, "dist", ARCHES[a].bin)))) run([process.execPath, join(ROOT, "scripts/build.ts"), "--all"]);
for (const arch of arches) {
  const bin = resolve(binOpt ?? join(ROOT, "dist", ARCHES[arch].bin));
  const t0 = performance.now();
  const files = [deb(arch, bin), tarball(arch, bin)];
  for (const f of files) console.log(`packaged ${f} (${(statSync(f).size / 1e6).toFixed(1)} MB)`);
  console.log(`  ${arch} in ${Math.round(performance.now() - t0)} ms`);
}
