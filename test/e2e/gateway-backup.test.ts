// `outpost backup DEST` while the instance runs and writes, `outpost restore SRC` refused while it
// runs and bringing the data and the secret key back once it is stopped.
import { chownSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { devWithSystem, request, runBin, startOutpost } from "./harness.ts";

const dirs: string[] = [];
const tempDir = () => { const d = mkdtempSync(join(tmpdir(), "outpost-bk-")); dirs.push(d); return d; };
t.teardown(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });
const mode = (p: string) => statSync(p).mode & 0o777;
const signIn = (url: string, email: string, password: string) => request(url, "POST", "/admin/auth", { body: { email, password } });

t.test("backup of a running instance, restore refused while it runs, restored after it stops", async (t) => {
  const dataDir = tempDir();
  const a = await startOutpost({ dataDir, defaultDb: true });
  t.teardown(() => a.kill());
  const before = await devWithSystem(a, "before-backup");

  // writes going on while the copy is taken
  let writing = true, written = 0;
  const writer = (async () => {
    while (writing) { await before.dev.post("/admin/systemmanagement", { name: `busy-${written++}` }); }
  })();
  const dest = join(tempDir(), "backup");
  const b = await runBin(["backup", dest, "--data-dir", dataDir]);
  writing = false;
  await writer;
  t.equal(b.code, 0, `backup exits 0 ${b.stderr}`);
  t.match(b.stdout, /outpost\.db \(\d+ bytes, schema \d+\), secret\.key, backup\.json/);
  t.ok(written > 0, "the instance kept writing meanwhile");
  t.equal(mode(dest), 0o700, "backup directory 0700");
  for (const f of ["outpost.db", "secret.key", "backup.json"]) t.equal(mode(join(dest, f)), 0o600, `${f} 0600`);
  const manifest = JSON.parse(readFileSync(join(dest, "backup.json"), "utf8"));
  t.match(manifest, { format: 1, database: "outpost.db", secretKey: "secret.key" });
  t.ok(manifest.schema > 0, "schema version recorded");
  t.equal(readFileSync(join(dest, "secret.key"), "utf8"), readFileSync(join(dataDir, "secret.key"), "utf8"), "the key copied");
  t.equal((await runBin(["backup", dest, "--data-dir", dataDir])).code, 2, "a backup never writes into a directory that is not empty");

  const after = await devWithSystem(a, "after-backup");
  const busy = await runBin(["restore", dest, "--data-dir", dataDir, "--force"]);
  t.equal(busy.code, 2, "restore while the instance runs: exit 2");
  t.match(busy.stderr, new RegExp(`in use by process ${a.proc.pid}\\b.*stop the instance before restoring`));
  t.equal((await signIn(a.url, after.email, after.password)).status, 200, "the running instance is untouched");
  t.equal(await a.stop(), 0);

  const noForce = await runBin(["restore", dest, "--data-dir", dataDir]);
  t.equal(noForce.code, 2, "replacing a database takes --force");
  t.match(noForce.stderr, /add --force/);
  writeFileSync(join(dataDir, "secret.key"), "a-key-that-is-not-the-backup-s\n");
  // a service's data directory, restored by root (sudo): the files must stay the service's
  const asRoot = process.getuid?.() === 0;
  if (asRoot) chownSync(dataDir, 65534, 65534);
  const r = await runBin(["restore", dest, "--data-dir", dataDir, "--force"]);
  t.equal(r.code, 0, `restore exits 0 ${r.stderr}`);
  if (asRoot) for (const f of ["outpost.db", "secret.key", "outpost.lock"]) t.equal(statSync(join(dataDir, f)).uid, 65534, `${f} given the data directory's owner`);
  t.equal(readFileSync(join(dataDir, "secret.key"), "utf8"), readFileSync(join(dest, "secret.key"), "utf8"), "the key restored");
  t.equal(mode(join(dataDir, "outpost.db")), 0o600);

  const c = await startOutpost({ dataDir, defaultDb: true });
  t.teardown(() => c.stop());
  t.equal((await signIn(c.url, before.email, before.password)).status, 200, "data from before the backup is back");
  t.not((await signIn(c.url, after.email, after.password)).status, 200, "data from after the backup is gone");
});

t.test("restore refuses a backup written by a newer version; bad command lines exit 2", async (t) => {
  const dataDir = tempDir();
  const a = await startOutpost({ dataDir, defaultDb: true });
  const dest = join(tempDir(), "backup");
  t.equal((await runBin(["backup", dest, "--data-dir", dataDir])).code, 0);
  await a.stop();
  const { default: Database } = await import("libsql");
  const db = new Database(join(dest, "outpost.db"));
  db.prepare(`INSERT INTO schema_migrations(version, name, applied_at) VALUES (100000, 'from the future', '')`).run();
  db.close();
  const r = await runBin(["restore", dest, "--data-dir", dataDir, "--force"]);
  t.equal(r.code, 2);
  t.match(r.stderr, /written by a newer version of Outpost \(schema version 100000/);

  t.equal((await runBin(["backup"])).code, 2, "backup without a directory");
  t.equal((await runBin(["restore", join(tempDir(), "nothing-here"), "--data-dir", dataDir])).code, 2, "restore from a directory without a backup");
  t.equal((await runBin(["backup", join(tempDir(), "x"), "--data-dir", join(tempDir(), "empty")])).code, 2, "backup of a data directory without a database");
  const h = await runBin(["backup", "--help"]);
  t.equal(h.code, 0);
  t.match(h.stdout, /outpost restore SRC/);
});
