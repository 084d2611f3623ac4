// The gateway packages: the .deb installed into a throwaway root (dpkg --root with
// --force-script-chrootless: the maintainer scripts act on $DPKG_ROOT, never on this machine),
// checked for its files, the unit (systemd-analyze verify; its reload needs no /bin/kill), the
// user, the version the binary is stamped with, the copyright and changelog; an upgrade to a newer
// package backs the data up first (and a backup that fails stops it); the tarball's install.sh
// into another throwaway root, an upgrade with it too. Packaged uncompressed from the binary under test.
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import t from "tap";
import { gunzipSync } from "node:zlib";
import { BIN, devWithSystem, hasCommand, needs, startOutpost } from "./harness.ts";

const work = mkdtempSync(join(tmpdir(), "outpost-pkg-"));
t.teardown(() => rmSync(work, { recursive: true, force: true }));
const tools = ["dpkg", "dpkg-deb", "systemd-analyze", "systemd-sysusers"];
const opts = await needs(`root and ${tools.join(", ")}`, process.getuid?.() === 0 && tools.every(hasCommand));

function sh(cmd: string, args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(cmd, args, { encoding: "utf8", env: { ...process.env, ...env }, cwd: work });
  return { code: r.status, out: `${r.stdout ?? ""}${r.stderr ?? ""}` };
}
const mode = (p: string) => statSync(p).mode & 0o7777;
/** A root with what `systemd-analyze verify --root` needs besides our unit: the standard units,
 *  and a /bin/sh for ExecReload to name (merged /usr, as Debian has it; no /bin/kill, which a
 *  minimal image lacks). */
function newRoot(name: string) {
  const root = join(work, name);
  mkdirSync(join(root, "etc"), { recursive: true });
  mkdirSync(join(root, "usr/lib/systemd"), { recursive: true });
  mkdirSync(join(root, "usr/bin"), { recursive: true });
  symlinkSync("usr/bin", join(root, "bin"));
  writeFileSync(join(root, "usr/bin/sh"), "#!/bin/sh\n", { mode: 0o755 });
  if (existsSync("/usr/lib/systemd/system")) cpSync("/usr/lib/systemd/system", join(root, "usr/lib/systemd/system"), { recursive: true, verbatimSymlinks: true });
  return root;
}
const hostPasswd = existsSync("/etc/passwd") ? readFileSync("/etc/passwd", "utf8") : "";

/** The packages of the binary under test, as `version` when given (a later release). */
function packageAs(out: string, version?: string) {
  const r = sh(resolve(process.cwd(), "node_modules/.bin/bun"), [resolve(process.cwd(), "scripts/package.ts"), "--arch", "amd64", "--bin", BIN, "--out", join(work, out), "--compress", "none"], version ? { OUTPOST_VERSION: version } : {});
  if (r.code !== 0) throw new Error(`npm run package failed:\n${r.out}`);
  return { deb: join(work, out, /packaged (\S+\.deb)/.exec(r.out)![1]!.split("/").pop()!), tarball: join(work, out, /packaged (\S+\.tar)\b/.exec(r.out)![1]!.split("/").pop()!) };
}
/** The version the binary under test is stamped with, and its commit. */
const stamped = () => /^outpost (\S+) \(commit (\S+)\)$/m.exec(sh(BIN, ["--version"]).out) ?? ["", "", ""];
/** dpkg on a throwaway root (libc6 is not in its package database: that dependency alone is waived). */
const dpkg = (root: string, ...args: string[]) => sh("dpkg", ["--root", root, "--force-script-chrootless", "--force-depends", "--log", join(work, "dpkg.log"), ...args]);
function dpkgRoot(name: string) {
  const root = newRoot(name);
  for (const d of ["var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers"]) mkdirSync(join(root, d), { recursive: true });
  writeFileSync(join(root, "var/lib/dpkg/status"), "");
  return root;
}
/** An instance's data in the root's /var/lib/outpost, with a developer in it. */
async function dataIn(root: string) {
  const dataDir = join(root, "var/lib/outpost");
  mkdirSync(dataDir, { recursive: true });
  const o = await startOutpost({ dataDir, defaultDb: true });
  const s = await devWithSystem(o, "packaged");
  await o.stop();
  return s.email;
}
/** The backups made before upgrades in a root. */
const backupsIn = (root: string) => (existsSync(join(root, "var/backups/outpost")) ? readdirSync(join(root, "var/backups/outpost")).sort() : []);

let deb = "", tarball = "";
t.before(() => {
  if (opts.skip) return;
  ({ deb, tarball } = packageAs("out"));
});

t.test("the .deb installs into a throwaway root: binary, unit, config, user, copyright, changelog; the unit verifies", opts, async (t) => {
  const root = dpkgRoot("deb-root");
  const i = dpkg(root, "-i", deb);
  t.equal(i.code, 0, `dpkg -i exits 0\n${i.out}`);

  const bin = join(root, "usr/bin/outpost");
  t.equal(mode(bin), 0o755, "binary");
  const [, version, commit] = stamped();
  t.match(version, /^\d+\.\d+\.\d+/, `the binary under test is stamped with a version (${version}) and commit (${commit})`);
  t.match(commit, /^([0-9a-f]{7,}(-dirty)?|unknown)$/);
  t.equal(sh(bin, ["--version"]).out, `outpost ${version} (commit ${commit})\n`, "the installed one runs, and says it");
  t.match(sh("dpkg-deb", ["-f", deb, "Version"]).out.trim(), version, "the package's version is the binary's");
  t.ok(deb.endsWith(`outpost_${version}_amd64.deb`), "and its file name's");
  const unit = readFileSync(join(root, "usr/lib/systemd/system/outpost.service"), "utf8");
  for (const line of ["User=outpost", "StateDirectory=outpost", "Restart=on-failure", "LimitNOFILE=", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "ExecReload=/bin/sh -c 'kill -HUP $MAINPID'", "ExecStart=/usr/bin/outpost --config /etc/outpost/outpost.toml"])
    t.ok(unit.includes(line), `unit: ${line}`);
  t.notMatch(unit, /^[^#]*\/bin\/kill/m, "no /bin/kill: a minimal image has none");

  const doc = join(root, "usr/share/doc/outpost");
  const copyright = readFileSync(join(doc, "copyright"), "utf8");
  t.match(copyright, /^Format: https:\/\/www\.debian\.org\/doc\/packaging-manuals\/copyright-format\/1\.0\/\n/, "a machine-readable copyright file");
  for (const part of ["embedded/bun", "embedded/libsql", "embedded/node_modules/aedes", "embedded/node_modules/elysia", "embedded/node_modules/quickjs-emscripten"]) t.match(copyright, part, `naming ${part}`);
  for (const license of ["MIT", "Apache-2.0", "LGPL-2"]) t.match(copyright, new RegExp(`^License: ${license}\\n `, "m"), `with the text of ${license}`);
  const changelog = gunzipSync(readFileSync(join(doc, "changelog.Debian.gz"))).toString("utf8");
  t.match(changelog, new RegExp(`^outpost \\(${version.replace(/[.+]/g, "\\$&")}\\) \\w+; urgency=\\w+\\n`), "a Debian changelog whose first entry is this version");
  t.match(changelog, /^ -- .+ <.+>  \w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} \+0000$/m, "signed and dated as Debian's format has it");
  const verify = sh("systemd-analyze", ["verify", `--root=${root}`, "outpost.service"]);
  t.equal(verify.code, 0, `systemd-analyze verify passes${verify.out ? `\n${verify.out}` : ""}`);

  const passwd = readFileSync(join(root, "etc/passwd"), "utf8");
  const user = /^outpost:x:(\d+):(\d+):[^:]*:\/var\/lib\/outpost:(\S+)$/m.exec(passwd);
  t.ok(user, "the outpost user, home /var/lib/outpost");
  t.ok(Number(user?.[1]) < 1000, "a system user");
  t.match(user?.[3] ?? "", /nologin/, "without a login shell");
  const gid = /^outpost:x:(\d+):/m.exec(readFileSync(join(root, "etc/group"), "utf8"))?.[1];
  const cfg = join(root, "etc/outpost/outpost.toml");
  t.equal(mode(cfg), 0o640, "settings 0640");
  t.equal(String(statSync(cfg).gid), gid, "readable by the outpost group");
  t.equal(mode(join(root, "etc/outpost")), 0o750);
  t.match(readFileSync(join(root, "var/lib/dpkg/info/outpost.conffiles"), "utf8"), /\/etc\/outpost\/outpost\.toml/, "the settings are a conffile");
  // the settings file is what the binary reads: only the edge's identity is missing
  const check = sh(bin, ["--config", cfg, "--help"]);
  t.equal(check.code, 0, "the binary reads the packaged settings");
  t.match(sh(bin, ["--config", cfg, "--data-dir", join(work, "d")]).out, /--platform-url: required in edge mode/);

  const r = dpkg(root, "--purge", "outpost");
  t.equal(r.code, 0, `dpkg --purge exits 0\n${r.out}`);
  t.notOk(existsSync(bin), "purged");
  t.equal(existsSync("/etc/passwd") ? readFileSync("/etc/passwd", "utf8") : "", hostPasswd, "this machine's users untouched");
});

t.test("an upgrade to a newer .deb backs the data up first with the installed version; a backup that fails stops it", opts, async (t) => {
  const root = dpkgRoot("upgrade-root");
  t.equal(dpkg(root, "-i", deb).code, 0, "the current package installed");
  t.same(backupsIn(root), [], "a first install makes no backup");
  const email = await dataIn(root);
  const [, version] = stamped();
  const next = packageAs("next", `${version}+next1`);
  t.match(next.deb, /outpost_[^_]+\+next1_amd64\.deb$/);

  // a backup that cannot be written stops the upgrade: the installed version stays
  mkdirSync(join(root, "var/backups"), { recursive: true });
  writeFileSync(join(root, "var/backups/outpost"), "not a directory");
  const refused = dpkg(root, "-i", next.deb);
  t.not(refused.code, 0, "dpkg -i fails");
  t.match(dpkg(root, "-s", "outpost").out, new RegExp(`^Version: ${version.replace(/[.+]/g, "\\$&")}$`, "m"), "the installed version stays");
  rmSync(join(root, "var/backups/outpost"));

  const up = dpkg(root, "-i", next.deb);
  t.equal(up.code, 0, `the upgrade: dpkg -i exits 0\n${up.out}`);
  t.match(up.out, /outpost: backup before the upgrade in \S+before-upgrade-from-/, "it says where the backup is");
  t.match(dpkg(root, "-s", "outpost").out, /^Version: \S+\+next1$/m, "the newer version is installed");
  const backups = backupsIn(root);
  t.equal(backups.length, 1, "one backup");
  t.match(backups[0], new RegExp(`^before-upgrade-from-${version.replace(/[.+]/g, "\\$&")}-\\d{8}T\\d{6}Z$`), "named after the version it came from");
  const b = join(root, "var/backups/outpost", backups[0]!);
  t.equal(mode(join(root, "var/backups/outpost")), 0o700, "the backups directory is root's alone");
  t.ok(existsSync(join(b, "outpost.db")) && existsSync(join(b, "secret.key")), "the database and its key");
  const manifest = JSON.parse(readFileSync(join(b, "backup.json"), "utf8"));
  t.equal(manifest.outpost, version, "made by the version installed before");
  t.ok(readFileSync(join(b, "outpost.db")).includes(Buffer.from(email)), "holding the instance's data");

  // OUTPOST_SKIP_BACKUP: none; and the newest three stay
  t.equal(sh("dpkg", ["--root", root, "--force-script-chrootless", "--force-depends", "-i", next.deb], { OUTPOST_SKIP_BACKUP: "1" }).code, 0, "reinstalled without a backup");
  t.equal(backupsIn(root).length, 1, "OUTPOST_SKIP_BACKUP=1: no backup");
  for (let n = 0; n < 4; n++) t.equal(dpkg(root, "-i", next.deb).code, 0, `upgrade ${n + 2}`);
  t.equal(backupsIn(root).length, 3, "the newest three backups are kept");
  t.equal(existsSync("/etc/passwd") ? readFileSync("/etc/passwd", "utf8") : "", hostPasswd, "this machine's users untouched");
});

t.test("the tarball's install.sh installs the same parts into a throwaway root", opts, async (t) => {
  const root = newRoot("tar-root");
  const x = sh("tar", ["-xf", tarball, "-C", work]);
  t.equal(x.code, 0, x.out);
  const dir = join(work, tarball.split("/").pop()!.replace(/\.tar.*$/, ""));
  const i = sh("sh", [join(dir, "install.sh")], { DESTDIR: root });
  t.equal(i.code, 0, `install.sh exits 0\n${i.out}`);
  t.equal(mode(join(root, "usr/local/bin/outpost")), 0o755, "binary under /usr/local");
  const unit = readFileSync(join(root, "etc/systemd/system/outpost.service"), "utf8");
  t.match(unit, /^ExecStart=\/usr\/local\/bin\/outpost --config \/etc\/outpost\/outpost\.toml$/m, "the unit runs it");
  const verify = sh("systemd-analyze", ["verify", `--root=${root}`, "outpost.service"]);
  t.equal(verify.code, 0, `systemd-analyze verify passes${verify.out ? `\n${verify.out}` : ""}`);
  t.match(readFileSync(join(root, "etc/passwd"), "utf8"), /^outpost:x:\d+:\d+:[^:]*:\/var\/lib\/outpost:/m, "the outpost user");
  t.equal(mode(join(root, "etc/outpost/outpost.toml")), 0o640);

  t.match(readFileSync(join(root, "usr/local/share/doc/outpost/copyright"), "utf8"), /^Format: /, "the copyright file");
  t.ok(existsSync(join(root, "usr/local/share/doc/outpost/changelog.Debian.gz")), "and the changelog");

  // again, as an upgrade: the admin's settings are kept, the data backed up first
  writeFileSync(join(root, "etc/outpost/outpost.toml"), "mode = \"edge\"\ndata-dir = \"/var/lib/outpost\"\n# mine\n");
  await dataIn(root);
  const again = sh("sh", [join(dir, "install.sh")], { DESTDIR: root });
  t.equal(again.code, 0, again.out);
  t.match(readFileSync(join(root, "etc/outpost/outpost.toml"), "utf8"), /# mine/, "settings kept on upgrade");
  t.match(backupsIn(root)[0] ?? "", /^before-upgrade-from-\S+-\d{8}T\d{6}Z$/, "a backup before the upgrade");
  t.ok(existsSync(join(root, "etc/outpost/outpost.toml.new")), "the new defaults beside them");
  t.equal(existsSync("/etc/passwd") ? readFileSync("/etc/passwd", "utf8") : "", hostPasswd, "this machine's users untouched");
});
