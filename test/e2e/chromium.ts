// Headless Chromium for the browser suites (browser.test.ts, browser-console.test.ts), through
// puppeteer-core and the machine's own Chromium (Debian's chromium package).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "puppeteer-core";

export const CHROMIUM = process.env.OUTPOST_CHROMIUM ?? "/usr/bin/chromium";

/** A Chromium with a profile of its own, removed by the cleanup pushed on `cleanups`. */
export async function launchChromium(cleanups: (() => Promise<unknown>)[], protocolTimeout: number): Promise<Browser> {
  const puppeteer = (await import("puppeteer-core")).default;
  const profile = mkdtempSync(join(tmpdir(), "outpost-chromium-"));
  cleanups.push(async () => rmSync(profile, { recursive: true, force: true }));
  // the machine's network is closed: no background connections, no first-run or update checks
  return puppeteer.launch({
    executablePath: CHROMIUM, headless: true, userDataDir: profile, protocolTimeout,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}
