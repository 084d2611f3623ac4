// `outpost backup DEST` and `outpost restore SRC`: the database and the key that seals its stored
// credentials, as one directory.
// A backup is taken while the instance runs: VACUUM INTO copies one read transaction of the
// database, so it is consistent however busy the instance is, and it blocks no writer (WAL).
// A restore takes the data directory's lock first, so it never replaces the database under a
// running instance (nor may one start while it works).
import { closeSync, constants, existsSync, fsyncSync, mkdirSync, openSync, readdirSync, readSync, renameSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { type Config, ConfigError, loadConfig } from "../config.ts";
import { Refusal, refuse } from "../core/errors.ts";
import { lockDataDir, ownLikeDir } from "../store/datadir.ts";
import { openDb } from "../store/db.ts";
import { MIGRATIONS } from "../store/migrations.ts";
import { nativeFallbackDir } from "../store/native.ts";
import { VERSION } from "../version.ts";

export const BACKUP_HELP = `outpost backup DEST — copy a running (or stopped) instance's database and secret key
outpost restore SRC — put such a copy back, in place of the instance's database

Usage: outpost backup DEST [--config FILE] [--data-dir DIR] [--db file:PATH] [--secret-key TEXT]
       outpost restore SRC [--force] [same flags]

The flags are the instance's own (give the same --config as the service, e.g.
/etc/outpost/outpost.toml): they say where its database and data directory are.

backup   DEST is a new (or empty) directory. It gets outpost.db (a consistent copy, taken
         without stopping the instance), secret.key (the key its stored credentials are
         sealed with, unless --secret-key gives it: keep that yourself) and backup.json. The
         files are readable by their owner alone: they hold password hashes, tokens and the key.
restore  Stop the instance first: restore refuses while it runs (it holds the data directory).
         It replaces the database (--force when there is one) and the secret key, checks the
         copy, and gives the files the data directory's owner (run it with sudo as you like).
         A database written by a newer version is refused.

Exit status: 0 done, 1 failed, 2 a bad command line or a refusal (instance running, newer
database, database there without --force).
`;

interface Out { write(s: string): unknown }
export interface BackupIo { stdout: Out; stderr: Out; env: Record<string, string | undefined> }

const DB = "outpost.db", KEY = "secret.key", MANIFEST = "backup.json";
const KNOWN_SCHEMA = Math.max(...MIGRATIONS.map((m) => m.version));

/** The directory named first, the instance's settings after it; restore also takes --force. */
function parse(cmd: "backup" | "restore", argv: string[], env: BackupIo["env"]): { dir: string; force: boolean; config: Config } | "help" {
  if (argv.some((a) => /^--?(help|h)$/.test(a))) return "help";
  const [dir, ...rest] = argv;
  if (!dir || dir.startsWith("-")) throw new ConfigError(`outpost ${cmd} needs a directory first (outpost ${cmd} ${cmd === "backup" ? "DEST" : "SRC"} [flags])`);
  const force = cmd === "restore" && rest.some((a) => a === "--force" || a === "-force");
  // the mode is not ours to check here: an edge's settings need not hold its token to be backed up
  const config = loadConfig([...rest.filter((a) => !/^--?force$/.test(a)), "--mode", "platform"], env);
  if (!config.db.startsWith("file:")) throw new ConfigError(`--db ${config.db}: backup and restore work on a file: database (a libSQL server keeps its own backups)`);
  nativeFallbackDir(join(config.dataDir, "native"));
  return { dir: resolve(dir), force, config };
}

const dbPath = (c: Config) => c.db.slice("file:".length).replace(/^\/\/(?=\/)/, "");

/** A copy only its owner may read (from its first byte: copyFile would give it the source's
 *  mode), written whole or not at all. */
function copyPrivate(from: string, to: string) {
  const part = `${to}.part`;
  rmSync(part, { force: true });
  const src = openSync(from, "r");
  const dst = openSync(part, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    const buf = Buffer.allocUnsafe(1 << 20);
    for (let n; (n = readSync(src, buf, 0, buf.length, null)) > 0;)
      for (let off = 0; off < n;) off += writeSync(dst, buf, off, n - off);
    fsyncSync(dst);
  } finally { closeSync(src); closeSync(dst); }
  renameSync(part, to);
}

/** The highest schema version a database file records (0: none), and whether it reads whole.
 *  The file is left in rollback-journal mode: one self-contained file, with no -wal beside it
 *  whose writes a copy of the file alone would miss (a -wal there is taken in first). */
async function inspect(path: string): Promise<{ schema: number; ok: string }> {
  const { default: Database } = await import("libsql");
  const db = new Database(path);
  try {
    db.exec("PRAGMA journal_mode=DELETE");
    const check = db.prepare(`PRAGMA quick_check`).get() as { quick_check?: string } | undefined;
    const hasTable = db.prepare(`SELECT 1 AS x FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).get();
    const schema = hasTable ? Number((db.prepare(`SELECT max(version) AS v FROM schema_migrations`).get() as { v: unknown }).v ?? 0) : 0;
    return { schema, ok: check?.quick_check ?? "no answer" };
  } finally { db.close(); }
}

async function backup(dest: string, config: Config, io: BackupIo): Promise<number> {
  const src = dbPath(config);
  if (!existsSync(src)) throw refuse(`there is no database at ${src} (check --data-dir/--db, or --config)`);
  if (existsSync(dest) && (!statSync(dest).isDirectory() || readdirSync(dest).length > 0)) throw refuse(`${dest} exists and is not an empty directory`);
  mkdirSync(dest, { recursive: true, mode: 0o700 });
  const out = join(dest, DB);
  // VACUUM INTO writes into an empty file as it finds it: made 0600 first
  closeSync(openSync(out, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600));
  const db = await openDb({ url: `file:${src}` });
  try { await db.run(`VACUUM INTO ?`, [out]); } finally { await db.close(); }
  const { schema, ok } = await inspect(out);
  if (ok !== "ok") throw new Error(`the copy does not read back whole (${ok})`);
  const keyFile = join(config.dataDir, KEY);
  const key = !config.secretKey && existsSync(keyFile);
  if (key) copyPrivate(keyFile, join(dest, KEY));
  const manifest = { format: 1, outpost: VERSION, schema, createdAt: new Date().toISOString(), database: DB, secretKey: key ? KEY : config.secretKey ? "given by --secret-key, not copied" : null };
  writeFileSync(join(dest, MANIFEST), JSON.stringify(manifest, null, 2) + "\n", { mode: 0o600 });
  io.stdout.write(`backup of ${src} written to ${dest}: ${DB} (${statSync(out).size} bytes, schema ${schema})${key ? `, ${KEY}` : ""}, ${MANIFEST}\n`);
  if (config.secretKey) io.stderr.write("outpost backup: the secret key is given by --secret-key: it is not in the backup, keep it with it\n");
  return 0;
}

async function restore(from: string, force: boolean, config: Config, io: BackupIo): Promise<number> {
  const srcDb = join(from, DB);
  if (!existsSync(srcDb)) throw refuse(`${from} holds no ${DB} (a directory made by outpost backup)`);
  const target = dbPath(config);
  const lock = await lockDataDir(config.dataDir, "stop the instance before restoring its data");
  try {
    if (existsSync(target) && statSync(target).size > 0 && !force) throw refuse(`a database is already at ${target}: restore replaces it, add --force to do that`);
    mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
    // checked as a copy beside the target (opening a database may change it; the backup stays as it is)
    const staged = `${target}.restore`;
    for (const f of [staged, `${staged}-wal`, `${staged}-shm`]) rmSync(f, { force: true });
    copyPrivate(srcDb, staged);
    // a backup opened in WAL mode since (by a tool) may keep writes in its -wal: they count
    if (existsSync(`${srcDb}-wal`)) copyPrivate(`${srcDb}-wal`, `${staged}-wal`);
    const { schema, ok } = await inspect(staged);
    for (const f of [`${staged}-wal`, `${staged}-shm`]) rmSync(f, { force: true });
    if (ok !== "ok") { rmSync(staged, { force: true }); throw refuse(`${srcDb} does not read whole (${ok}): not restored`); }
    if (schema > KNOWN_SCHEMA) {
      rmSync(staged, { force: true });
      throw refuse(`${srcDb} was written by a newer version of Outpost (schema version ${schema}; this one knows up to ${KNOWN_SCHEMA}): restore it with that version`);
    }
    // the old database's log and index would be read as the new one's
    for (const f of [`${target}-wal`, `${target}-shm`]) rmSync(f, { force: true });
    renameSync(staged, target);
    ownLikeDir(target, dirname(target));
    const srcKey = join(from, KEY);
    if (existsSync(srcKey)) {
      const keyFile = join(config.dataDir, KEY);
      copyPrivate(srcKey, keyFile);
      ownLikeDir(keyFile, config.dataDir);
    } else io.stderr.write(`outpost restore: ${from} holds no ${KEY}: stored credentials open only with the key they were sealed with (--secret-key)\n`);
    io.stdout.write(`restored ${target} from ${from} (schema ${schema})${existsSync(srcKey) ? ` and ${KEY}` : ""}\n`);
    return 0;
  } finally { lock.release(); }
}

export async function backupCommand(cmd: "backup" | "restore", argv: string[], io: BackupIo): Promise<number> {
  try {
    const p = parse(cmd, argv, io.env);
    if (p === "help") { io.stdout.write(BACKUP_HELP); return 0; }
    return cmd === "backup" ? await backup(p.dir, p.config, io) : await restore(p.dir, p.force, p.config, io);
  } catch (e) {
    if (e instanceof ConfigError || e instanceof Refusal) {
      io.stderr.write(`outpost ${cmd}: ${e.message.split("\n").join(`\noutpost ${cmd}: `)}\n`);
      if (e instanceof ConfigError) io.stderr.write(`Run 'outpost ${cmd} --help' for the flags.\n`);
      return 2;
    }
    io.stderr.write(`outpost ${cmd}: failed: ${(e as Error).message}\n`);
    return 1;
  }
}
