// Servers some tests need (Redis, PostgreSQL, MariaDB) come from Debian packages that .ci/run
// installs and starts. Where they are missing, those tests are skipped with a note, unless
// OUTPOST_REQUIRE_SERVICES is set (.ci/run sets it): then a missing server fails the run.
import { connect } from "node:net";

export const servicesRequired = !!process.env.OUTPOST_REQUIRE_SERVICES;

export function canConnect(port: number, host = "127.0.0.1", timeoutMs = 1000): Promise<boolean> {
  return new Promise((res) => {
    const s = connect(port, host);
    const done = (ok: boolean) => { s.destroy(); res(ok); };
    s.setTimeout(timeoutMs, () => done(false));
    s.once("connect", () => done(true));
    s.once("error", () => done(false));
  });
}

export function hasCommand(cmd: string): boolean {
  return Bun.spawnSync(["sh", "-c", `command -v ${cmd}`]).exitCode === 0;
}

/** Whether to run tests needing `what`; logs why not when skipping. */
export function available(what: string, present: boolean): boolean {
  if (present || servicesRequired) return true;
  console.warn(`SKIPPED: ${what} is not available here (bash scripts/test-databases.sh, or apt-get install it; .ci/run does both)`);
  return false;
}
