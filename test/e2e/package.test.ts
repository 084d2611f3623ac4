// The gateway packages: the .deb installed into a throwaway root (dpkg --root with
// --force-script-chrootless: the maintainer scripts act on $DPKG_ROOT, never on this machine),
// checked for its files, the unit (systemd-analyze verify) and the user; the tarball's install.sh
// into another throwaway root. Packaged uncompressed from the binary under test.
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import t from "tap";
import { BIN, hasCommand, needs } from "./harness.ts";

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
 *  and a /bin/kill for ExecReload to name (merged /usr, as Debian has it). */
function newRoot(name: string) {
  const root = join(work, name);
  mkdirSync(join(root, "etc"), { recursive: true });
  mkdirSync(join(root, "usr/lib/systemd"), { recursive: true });
  mkdirSync(join(root, "usr/bin"), { recursive: true });
  symlinkSync("usr/bin", join(root, "bin"));
  writeFileSync(join(root, "usr/bin/kill"), "#!/bin/sh\n", { mode: 0o755 });
  if (existsSync("/usr/lib/systemd/system")) cpSync("/usr/lib/systemd/system", join(root, "usr/lib/systemd/system"), { recursive: true, verbatimSymlinks: true });
  return root;
}
const hostPasswd = existsSync("/etc/passwd") ? readFileSync("/etc/passwd", "utf8") : "";

let deb = "", tarball = "";
t.before(() => {
  if (opts.skip) return;
  const r = sh(resolve(process.cwd(), "node_modules/.bin/bun"), [resolve(process.cwd(), "scripts/package.ts"), "--arch", "amd64", "--bin", BIN, "--out", join(work, "out"), "--compress", "none"]);
  if (r.code !== 0) throw new Error(`npm run package failed:\n${r.out}`);
  deb = join(work, "out", /packaged (\S+\.deb)/.exec(r.out)![1]!.split("/").pop()!);
  tarball = join(work, "out", /packaged (\S+\.tar)\b/.exec(r.out)![1]!.split("/").pop()!);
});

t.test("the .deb installs into a throwaway root: binary, unit, config, user; the unit verifies", opts, async (t) => {
  const root = newRoot("deb-root");
  for (const d of ["var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers"]) mkdirSync(join(root, d), { recursive: true });
  writeFileSync(join(root, "var/lib/dpkg/status"), "");
  // libc6 is not in the throwaway root's package database: its dependency alone is waived
  const i = sh("dpkg", ["--root", root, "--force-script-chrootless", "--force-depends", "--log", join(work, "dpkg.log"), "-i", deb]);
  t.equal(i.code, 0, `dpkg -i exits 0\n${i.out}`);

  const bin = join(root, "usr/bin/outpost");
  t.equal(mode(bin), 0o755, "binary");
  t.match(sh(bin, ["--version"]).out, /^outpost \d+\.\d+\.\d+/, "and it runs");
  const unit = readFileSync(join(root, "usr/lib/systemd/system/outpost.service"), "utf8");
  for (const line of ["User=outpost", "StateDirectory=outpost", "Restart=on-failure", "LimitNOFILE=", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "ExecReload=/bin/kill -HUP $MAINPID", "ExecStart=/usr/bin/outpost --config /etc/outpost/outpost.toml"])
    t.ok(unit.includes(line), `unit: ${line}`);
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

  const r = sh("dpkg", ["--root", root, "--force-script-chrootless", "--purge", "outpost"]);
  t.equal(r.code, 0, `dpkg --purge exits 0\n${r.out}`);
  t.notOk(existsSync(bin), "purged");
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

  // again, as an upgrade: the admin's settings are kept
  writeFileSync(join(root, "etc/outpost/outpost.toml"), "mode = \"edge\"\n# mine\n");
  const again = sh("sh", [join(dir, "install.sh")], { DESTDIR: root });
  t.equal(again.code, 0, again.out);
  t.match(readFileSync(join(root, "etc/outpost/outpost.toml"), "utf8"), /# mine/, "settings kept on upgrade");
  t.ok(existsSync(join(root, "etc/outpost/outpost.toml.new")), "the new defaults beside them");
  t.equal(existsSync("/etc/passwd") ? readFileSync("/etc/passwd", "utf8") : "", hostPasswd, "this machine's users untouched");
});
