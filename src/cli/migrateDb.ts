// `outpost migrate-db --from file:PATH --to postgres://...`: a platform's data moved from its
// libSQL file into PostgreSQL (store/copy.ts does the copying).
import { existsSync } from "node:fs";
import { dirname } from "node:path";
import { Refusal } from "../core/errors.ts";
import { copyDatabase } from "../store/copy.ts";
import { lockDataDir } from "../store/datadir.ts";
import { type Db, isPostgresUrl, openDb, redactedUrl } from "../store/db.ts";
import { migrate } from "../store/migrations.ts";
import { nativeFallbackDir } from "../store/native.ts";

export const MIGRATE_DB_HELP = `outpost migrate-db — copy a platform's data from a libSQL file into PostgreSQL

Usage: outpost migrate-db --from file:PATH --to postgres://USER:PASSWORD@HOST:PORT/DB

Stop the platform first: migrate-db takes the data directory holding the file (where the
platform's lock is), so it refuses while the platform runs. The file is first brought to this
version's schema, the PostgreSQL database gets the schema, and every table is copied in one
transaction: collections and their rows, users, devices, roles, code, edges and the sync change
log, MQTT sessions and retained messages. The PostgreSQL database must hold no platform yet.
Then start the platform with --db postgres://... (and the same --secret-key or secret.key: the
credentials stored for external databases are sealed with it).

Exit status: 0 done, 1 failed, 2 a bad command line or a refusal (platform running, destination
not empty).
`;

interface Out { write(s: string): unknown }

function parse(argv: string[]): { from: string; to: string } | "help" {
  if (argv.some((a) => /^--?(help|h)$/.test(a))) return "help";
  const v: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const m = /^--(from|to)(?:=(.*))?$/.exec(argv[i]!);
    if (!m) throw new Refusal(`unexpected argument '${argv[i]}'`);
    const value = m[2] ?? argv[++i];
    if (!value) throw new Refusal(`--${m[1]} needs a database URL`);
    v[m[1]!] = value;
  }
  if (!v.from || !v.to) throw new Refusal("give both --from file:PATH and --to postgres://...");
  if (!v.from.startsWith("file:")) throw new Refusal(`--from ${v.from}: a libSQL file (file:PATH)`);
  if (!isPostgresUrl(v.to)) throw new Refusal(`--to ${redactedUrl(v.to)}: a PostgreSQL URL (postgres://USER:PASSWORD@HOST:PORT/DB)`);
  return { from: v.from, to: v.to };
}

export async function migrateDbCommand(argv: string[], io: { stdout: Out; stderr: Out }): Promise<number> {
  let args: ReturnType<typeof parse>;
  try { args = parse(argv); } catch (e) {
    io.stderr.write(`outpost migrate-db: ${(e as Error).message}\nRun 'outpost migrate-db --help' for the usage.\n`);
    return 2;
  }
  if (args === "help") { io.stdout.write(MIGRATE_DB_HELP); return 0; }
  const path = args.from.slice("file:".length).replace(/^\/\/(?=\/)/, "");
  let from: Db | undefined, to: Db | undefined;
  try {
    nativeFallbackDir(`${dirname(path)}/native`);
    if (!existsSync(path)) throw new Refusal(`there is no database at ${path}`);
    const lock = await lockDataDir(dirname(path), "stop the platform first (migrate-db copies a database no one writes)");
    try {
      from = await openDb({ url: args.from });
      await migrate(from);
      to = await openDb({ url: args.to, onRetry: (err) => io.stderr.write(`outpost migrate-db: ${redactedUrl(args.to)} cannot be reached yet (${err.message}); trying again\n`) });
      await migrate(to);
      let rows = 0, tables = 0;
      await copyDatabase(from, to, (r) => { rows += r.rows; tables++; if (r.rows) io.stdout.write(`${r.table}: ${r.rows} rows\n`); });
      io.stdout.write(`copied ${rows} rows of ${tables} tables from ${args.from} to ${to.url}\n`);
      return 0;
    } finally { lock.release(); }
  } catch (e) {
    io.stderr.write(`outpost migrate-db: ${(e as Error).message}\n`);
    return e instanceof Refusal ? 2 : 1;
  } finally {
    await from?.close().catch(() => {});
    await to?.close().catch(() => {});
  }
}
