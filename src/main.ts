// CLI entry: flags -> Config -> start(mode), or a subcommand (`outpost status`). Exit status 2 for
// a bad command line.
import { start } from "./app.ts";
import { statusCommand } from "./cli/status.ts";
import { ConfigError, HELP, loadConfig } from "./config.ts";
import { VERSION } from "./version.ts";

/** Longest a SIGTERM/SIGINT drain may take before the process exits anyway. */
const STOP_DEADLINE_MS = 20_000;

async function main() {
  if (process.argv[2] === "status") {
    const code = await statusCommand(process.argv.slice(3), { stdout: process.stdout, stderr: process.stderr, env: process.env });
    process.exit(code);
  }
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
  if (config.version) { process.stdout.write(`outpost ${VERSION}\n`); return; }

  let app;
  try {
    app = await start(config);
  } catch (e) {
    process.stderr.write(`outpost: could not start: ${(e as Error).message}\n`);
    process.exit(1);
  }
  const shutdown = (signal: string) => {
    app.log.info("shutting down", { signal });
    // a part that cannot stop must not keep the process (and its ports) forever
    setTimeout(() => { app.log.error("shutdown took too long: exiting", { afterMs: STOP_DEADLINE_MS }); process.exit(1); }, STOP_DEADLINE_MS).unref();
    app.stop().then(() => process.exit(0), () => process.exit(1));
  };
  process.on("SIGINT", () => shutdown("SIGINT"));
  process.on("SIGTERM", () => shutdown("SIGTERM"));
}

await main();
