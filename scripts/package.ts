// Packages for gateways: `npm run package` -> for amd64, arm64 and amd64-baseline (x64 CPUs without
// AVX2: the same package with the baseline binary), a .deb (made with dpkg-deb) and a tarball with
// the same parts and an install.sh for systems without dpkg. Both install the
// binary, the systemd unit (packaging/outpost.service), the settings file /etc/outpost/outpost.toml
// and the service's user (packaging/sysusers.conf).
//   bun scripts/package.ts                       all three, from dist/ (built when missing)
//   bun scripts/package.ts --arch amd64 --bin F  one, from the binary F
//   --out DIR (dist/), --compress xz|gzip|none (xz)
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "..");
const PKG = join(ROOT, "packaging");
const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
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

function deb(arch: Arch, bin: string): string {
  const stage = mkdtempSync(join(tmpdir(), "outpost-deb-"));
  chmodSync(stage, 0o755); // the package's "./": never a 0700 root
  try {
    put(bin, join(stage, "usr/bin/outpost"), 0o755);
    put(join(PKG, "outpost.service"), join(stage, "usr/lib/systemd/system/outpost.service"), 0o644);
    put(join(PKG, "sysusers.conf"), join(stage, "usr/lib/sysusers.d/outpost.conf"), 0o644);
    put(join(PKG, "outpost.toml"), join(stage, "etc/outpost/outpost.toml"), 0o640);
    for (const s of ["postinst", "prerm", "postrm"]) put(join(PKG, "deb", s), join(stage, "DEBIAN", s), 0o755);
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
