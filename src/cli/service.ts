// Running as a service: why a start was refused (exit 2), and SIGHUP (reload the settings and
// the TLS certificate).
import { createPrivateKey, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { createSecureContext } from "node:tls";
import type { App } from "../app.ts";
import { type Config, ConfigError, loadConfig } from "../config.ts";
import { Refusal } from "../core/errors.ts";
import { LOG_LEVELS } from "../core/log.ts";

const PORT_FLAGS = ["httpPort", "httpsPort", "mqttPort", "mqttWsPort", "mqttTlsPort", "mqttWssPort", "metricsPort"] as const;
const kebab = (s: string) => s.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase());

/** The message for a start that cannot succeed as configured (exit 2: restarting will not help),
 *  or null for any other failure. */
export function refusalMessage(err: unknown, config: Config): string | null {
  if (err instanceof Refusal) return err.message;
  const e = err as { code?: string; message?: string; port?: unknown };
  if (e?.code !== "EADDRINUSE") return null;
  // Bun.listen: the error's `port` ("Failed to listen at 127.0.0.1"); Bun.serve: "Failed to start
  // server. Is port 9000 in use?"; node:net: "listen EADDRINUSE: ... :9000"
  const port = typeof e.port === "number" && e.port > 0 ? e.port : Number(/(?:port |:)(\d+)\b(?!.*(?:port |:)\d)/.exec(e.message ?? "")?.[1]);
  const flag = PORT_FLAGS.find((k) => config[k] === port);
  const what = flag ? `--${kebab(flag)} ${port}` : Number.isFinite(port) ? `port ${port}` : "a port";
  return `${what} is in use by another process (EADDRINUSE): stop it, or choose another port`;
}

/** SIGHUP reads the settings again (flags > environment > config file, as at start) and applies
 *  what can change while running; a bad file is reported and the running settings kept. The
 *  handler is installed before the start so a hangup never ends the process. */
export function reloadOnHangup(argv: string[], app: () => App | undefined) {
  let queue = Promise.resolve();
  process.on("SIGHUP", () => {
    queue = queue.then(async () => {
      const a = app();
      if (!a) return; // still starting: it has just read them
      let next;
      try { next = loadConfig(argv); } catch (e) {
        a.log.error("SIGHUP: the settings could not be read; keeping the running ones", { error: e instanceof ConfigError ? e.message : String(e) });
        return;
      }
      try { await reload(a, next); } catch (err) { a.log.error("SIGHUP: reload failed", { err }); }
    });
  });
}

/** What a reload changes while running; anything else is reported as needing a restart. The
 *  parts read these from the shared config object on use (throttling on its next reload of its
 *  cases, CORS on the next request). The certificate's files (--tls-cert, --tls-key) are read
 *  again at every reload; other files may be named while TLS stays on. */
const RELOADABLE = new Set<string>(["logLevel", "accessLog", "accessLogSample", "developmentMode", "enableDefaultThrottlers", "enableGlobalThrottlers", "corsOrigins"]);
const TLS_FILES = ["tlsCert", "tlsKey"];
const THROTTLING = ["developmentMode", "enableDefaultThrottlers", "enableGlobalThrottlers"];

/** Applies `next` to the running app and logs what changed (names and values of the settings
 *  applied, names only of those that need a restart: they may be secrets). */
export async function reload(app: App, next: Config) {
  const now = app.config as Record<string, unknown>, want = next as Record<string, unknown>;
  const changed: Record<string, { from: unknown; to: unknown }> = {};
  const needRestart: string[] = [];
  // TLS turned on or off needs the listeners made again: a restart
  const tlsStays = !!(app.config.tlsCert && app.config.tlsKey && next.tlsCert && next.tlsKey);
  const tls = tlsStays ? loadCertificate(app, next.tlsCert!, next.tlsKey!) : null;
  for (const k of new Set([...Object.keys(now), ...Object.keys(want)])) {
    if (JSON.stringify(now[k]) === JSON.stringify(want[k])) continue;
    if (RELOADABLE.has(k) || (TLS_FILES.includes(k) && tls)) changed[k] = { from: now[k], to: want[k] };
    else if (!TLS_FILES.includes(k) || !tlsStays) needRestart.push(kebab(k));
  }
  for (const k of Object.keys(changed)) now[k] = want[k];
  if (THROTTLING.some((k) => k in changed)) await app.services.throttle.reload();
  if (tls) {
    app.https?.reloadTls?.({ cert: tls.cert.toString("utf8"), key: tls.key.toString("utf8") });
    app.broker.reloadTls(tls);
    app.log.info("SIGHUP: TLS certificate reloaded (new connections get it)", { subject: tls.subject, validTo: tls.validTo });
  }
  // the report is shown under the old level or the new one, whichever says more
  const from = LOG_LEVELS.indexOf(changed.logLevel?.from as never), to = LOG_LEVELS.indexOf(app.config.logLevel);
  if (from >= 0 && from < to) app.log.setLevel(changed.logLevel!.from as Config["logLevel"]);
  else app.log.setLevel(app.config.logLevel);
  app.log.info("SIGHUP: settings reloaded", { changed, ...(needRestart.length ? { needRestart } : {}) });
  app.log.setLevel(app.config.logLevel);
  if (needRestart.length) app.log.warn("SIGHUP: these settings take effect at the next start", { settings: needRestart });
}

/** The certificate and key files, read and checked (they parse, the key is the certificate's);
 *  null, logged, when they are not: the running certificate stays. */
function loadCertificate(app: App, certFile: string, keyFile: string): { cert: Buffer; key: Buffer; subject: string; validTo: string } | null {
  try {
    const cert = readFileSync(certFile), key = readFileSync(keyFile);
    createSecureContext({ cert, key });
    const x = new X509Certificate(cert);
    if (!x.checkPrivateKey(createPrivateKey(key))) throw new Error("the key is not the certificate's");
    return { cert, key, subject: x.subject.replace(/\n/g, ", "), validTo: x.validTo };
  } catch (err) {
    app.log.error("SIGHUP: the TLS certificate could not be loaded; keeping the running one", { cert: certFile, key: keyFile, error: (err as Error).message });
    return null;
  }
}
