// What the sync hub's in-process tests start with: a platform on an in-memory database (the log
// compacted only when a test asks), a developer and one system.
import { type App, start } from "../../../src/app.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import { loadConfig } from "../../../src/config.ts";
import type { SyncHub } from "../../../src/sync/platform/hub.ts";

export async function startHubApp(name: string): Promise<{ app: App; hub: SyncHub; dev: Principal; sk: string }> {
  const app = await start(loadConfig(["--db", ":memory:", "--http-port", "0", "--log-level", "silent", "--sync-compact-ms", "3600000"]));
  const reg = await app.services.developers.register({ email: `${name}@example.com`, password: "pw" });
  const dev = (await app.services.tokens.resolve(reg.dev_token))!;
  const sk = (await app.services.systems.create(dev, { name })).system_key;
  return { app, hub: app.services.sync!, dev, sk };
}

/** Waits until `pred` holds, or fails after `ms`. */
export async function settle(pred: () => boolean | Promise<boolean>, ms = 5_000) {
  const end = Date.now() + ms;
  while (!(await pred())) { if (Date.now() > end) throw new Error("timed out"); await Bun.sleep(10); }
}
