// The console's browser-test kit, shared by the browser-console*.test.ts suites: one Chromium per
// suite (launched on first use, closed with the suite), pages that record script errors and CSP
// violations, sign-in, and the per-page check at both widths (no sideways overflow, a screenshot
// in artifacts/console/ (OUTPOST_ARTIFACTS overrides), no serious or critical axe-core violation).
import { existsSync, mkdirSync, readFileSync, } from "node:fs";
import { join, resolve } from "node:path";
import t, { type Test } from "tap";
import type { Browser, Page } from "puppeteer-core";
import { CHROMIUM, launchChromium } from "./chromium.ts";
import { needs } from "./harness.ts";

export const ARTIFACTS = resolve(process.env.OUTPOST_ARTIFACTS ?? "artifacts", "console");
const AXE = resolve("node_modules/axe-core/axe.min.js");
export const skip = await needs("chromium (apt-get install chromium) and axe-core", existsSync(CHROMIUM) && existsSync(AXE));
export const WIDTHS = [[1366, 900], [390, 844]] as const;

let browser: Browser | undefined;
/** Stops run when the suite ends, last pushed first (servers the test started). */
export const stops: (() => Promise<unknown>)[] = [];
t.teardown(async () => {
  await browser?.close().catch(() => {});
  for (const s of stops.reverse()) await s().catch(() => {});
});

/** The suite's Chromium, launched on first use. */
export async function launch(): Promise<Browser> {
  browser ??= await launchChromium(stops, 120_000);
  return browser;
}

export async function newPage(): Promise<Page> {
  const page = await (await launch()).newPage();
  await page.setViewport({ width: 1366, height: 900 });
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push((e as Error).message));
  // a CSP violation (an inline style the editor tried) is a console error; a refusal the test
  // asks for (a 4xx answer) is logged by the browser too, and expected
  page.on("console", (m) => { if (m.type() === "error" && !/^Failed to load resource: the server responded with a status of 4\d\d/.test(m.text())) errors.push(m.text()); });
  page.on("dialog", (d) => void d.accept());
  pageErrors.set(page, errors);
  return page;
}
const pageErrors = new Map<Page, string[]>();
/** Closes the page, which logged no script error and no CSP violation. */
export async function done(t: Test, page: Page) {
  t.same(pageErrors.get(page), [], "no script error and no CSP violation in the page");
  await page.close();
}

export async function signIn(page: Page, url: string, email: string, password: string) {
  await page.goto(`${url}/console`, { waitUntil: "load" });
  await page.waitForSelector("#signin");
  await page.type("#email", email);
  await page.type("#password", password);
  await page.click("#signin button[type=submit]");
  await page.waitForSelector("#signout");
}

/** The page at both widths: no horizontal overflow, a screenshot, and axe-core's serious and
 *  critical violations (none expected). `ready` is a selector the page shows once loaded. */
export async function checkPage(t: Test, page: Page, name: string, ready: string) {
  mkdirSync(ARTIFACTS, { recursive: true });
  for (const [width, height] of WIDTHS) {
    await page.setViewport({ width, height });
    await page.waitForSelector(ready);
    const overflow = await page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth - (globalThis as any).document.documentElement.clientWidth);
    t.ok(overflow <= 0, `${name} at ${width} px: the page does not overflow sideways (${overflow} px)`);
    await page.screenshot({ path: join(ARTIFACTS, `${name}-${width}.png`), fullPage: true });
    // axe-core goes in through DevTools (the page's CSP admits no inline script, rightly)
    if (!(await page.evaluate(() => "axe" in globalThis))) await page.evaluate(readFileSync(AXE, "utf8"));
    const bad = await page.evaluate(async () => {
      const r = await (globalThis as any).axe.run((globalThis as any).document, { resultTypes: ["violations"] });
      return (r.violations as any[]).filter((v) => v.impact === "serious" || v.impact === "critical")
        .map((v) => `${v.id}: ${v.nodes.slice(0, 3).map((n: any) => n.target.join(" ")).join(", ")}`);
    });
    t.same(bad, [], `${name} at ${width} px: no serious or critical accessibility violation`);
  }
  await page.setViewport({ width: 1366, height: 900 });
}

export const rowsOf = (page: Page, table: string, attr: string) =>
  page.$$eval(`#${table} tbody tr[${attr}]`, (els, a) => els.map((e) => e.getAttribute(a as string)), attr);
export const text = (page: Page, sel: string) => page.$eval(sel, (e) => (e.textContent ?? "").trim());
export async function waitRows(page: Page, table: string, attr: string, want: string[]) {
  await page.waitForFunction((tb, a, w) => JSON.stringify([...(globalThis as any).document.querySelectorAll(`#${tb} tbody tr[${a}]`)].map((e) => e.getAttribute(a))) === w,
    { timeout: 20_000 }, table, attr, JSON.stringify(want));
  return want;
}
