// The command line: flags -> Config -> start(mode), or a subcommand (`outpost status`, `backup`,
// `restore`, `migrate-db`). Exit status 2 for a bad command line, or a start refused as configured.
import { join } from "node:path";
import { type App, start } from "../app.ts";
import { backupCommand } from "./backup.ts";
import { migrateDbCommand } from "./migrateDb.ts";
import { refusalMessage, reloadOnHangup } from "./service.ts";
import { statusCommand } from "./status.ts";
import { ConfigError, HELP, loadConfig } from "../config.ts";
import { lockDataDir } from "../store/datadir.ts";
import { nativeFallbackDir } from "../store/native.ts";
import { BUILD } from "../version.ts";

/** Longest a SIGTERM/SIGINT drain may take before the process exits anyway. */
const STOP_DEADLINE_MS = 20_000;

async function main() {
  if (process.argv[2] === "backup" || process.argv[2] === "restore") {
    const code = await backupCommand(process.argv[2], process.argv.slice(3), { stdout: process.stdout, stderr: process.stderr, env: process.env });
    process.exit(code);
  }
  if (process.argv[2] === "migrate-db") {
    const code = await migrateDbCommand(process.argv.slice(3), { stdout: process.stdout, stderr: process.stderr });
    process.exit(code);
  }
  if (process.argv[2] === "status") {
    const code = await statusCommand(process.argv.slice(3), { stdout: process.stdout, stderr: process.stderr, env: process.env });
    process.exit(code);
  }
  // help never depends on the rest being valid (an edge's settings file without its token, say)
  if (process.argv.slice(2).some((a) => /^--?(help|h)$/.test(a))) { process.stdout.write(HELP); return; }
  let config;
  try {
    config = loadConfig(process.argv.slice(2));
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`outpost: ${e.message.split("\n").join("\noutpost: ")}\nRun 'outpost --help' for the flags.\n`);
      process.exit(2);
    }
    throw e;
  }
  if (config.help) { process.stdout.write(HELP); return; }
  if (config.version) { process.stdout.write(`outpost ${BUILD}\n`); return; }

  let app: App | undefined;
  reloadOnHangup(process.argv.slice(2), () => app);
  // an edge's restart asked by its platform: its parts stopped and started again in this process
  // (its ports, its data directory's lock and its settings stay)
  let restarting = false;
  const restart = () => {
    const old = app;
    if (restarting || !old) return;
    restarting = true;
    old.log.warn("restarting");
    old.stop().then(() => start(config, { restart })).then((next) => { app = next; restarting = false; }, (e) => {
      process.stderr.write(`outpost: could not start again: ${(e as Error).message}\n`);
      process.exit(1);
    });
  };
  // where the database engine's addon goes when $TMPDIR cannot load it (mounted noexec)
  nativeFallbackDir(join(config.dataDir, "native"));
  try {
    await lockDataDir(config.dataDir); // held until the process ends
    app = await start(config, { restart });
  } catch (e) {
    // exit 2: as configured it cannot start, and a supervisor restarting it would not help
    const refused = refusalMessage(e, config);
    process.stderr.write(`outpost: ${refused ? "" : "could not start: "}${refused ?? (e as Error).message}\n`);
    process.exit(refused ? 2 : 1);
  }
  // The binary starts with the JIT made reluctant (scripts/build.ts, jitPolicy): code that only
  // runs during a start is not compiled, which an idle gateway would hold for nothing. From here
  // on what runs is the work, compiled as usual. (From source the policy is already 1.)
  Bun.unsafe.setJITPolicy(1);
  // and what the start made and dropped (parsed configuration, the migrations' statements) is
  // collected once now, not whenever the heap next grows, with the bytecode the start compiled
  // (Bun.shrink: a full collection that also drops compiled code, made again from the source at a
  // function's next call): an idle gateway gives it back (about 3 MB resident on an idle edge)
  setTimeout(() => Bun.shrink(), 500).unref();
  const shutdown = (signal: string) => {
    const running = app!;
    running.log.info("shutting down", { signal });
    // a part that cannot stop must not keep the process (and its ports) forever
    setTimeout(() => { running.log.error("shutdown took too long: exiting", { afterMs: STOP_DEADLINE_MS }); process.exit(1); }, STOP_DEADLINE_MS).unref();
    running.stop().then(() => process.exit(0), () => process.exit(1));
  };
  process.on("SIGINT", () => shutdown("SIGINT"));
  process.on("SIGTERM", () => shutdown("SIGTERM"));
}

await main();
