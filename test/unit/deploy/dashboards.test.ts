// The Grafana dashboard and the Prometheus alert rules under deploy/ name only metrics the binary
// exposes: every outpost_* name in their queries is one a platform or an edge registers (with
// --metrics-system-labels, which adds the per-system families), a histogram's name with its
// _bucket, _sum or _count. A renamed metric, or a panel added for one that does not exist, fails here.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type App, start } from "../../../src/app.ts";
import { loadConfig } from "../../../src/config.ts";

const ROOT = new URL("../../../", import.meta.url).pathname;
const dirs: string[] = [];
const apps: App[] = [];
/** metric name -> its type, as a platform and an edge register them */
const exposed = new Map<string, string>();

async function startApp(args: string[]) {
  const dir = mkdtempSync(join(tmpdir(), "outpost-deploy-"));
  dirs.push(dir);
  const app = await start(loadConfig(["--data-dir", dir, "--db", ":memory:", "--http-port", "0", "--mqtt-port", "0", "--mqtt-ws-port", "0",
    "--log-level", "silent", "--metrics-system-labels", "3", ...args], {}));
  apps.push(app);
  for (const line of (await app.services.metrics.render()).split("\n")) {
    const m = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (m) exposed.set(m[1]!, m[2]!);
  }
}

beforeAll(async () => {
  await startApp([]);
  await startApp(["--mode", "edge", "--platform-url", "http://127.0.0.1:9", "--system-key", "0".repeat(30), "--edge-name", "gw", "--edge-token", "edge-token-1"]);
});
afterAll(async () => {
  for (const a of apps) await a.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Whether a name used in a query is exposed: as is, or a histogram's series. */
function isExposed(name: string): boolean {
  if (exposed.has(name)) return true;
  const m = /^(.+)_(bucket|sum|count)$/.exec(name);
  return !!m && exposed.get(m[1]!) === "histogram";
}
const namesIn = (expr: string) => [...new Set(expr.match(/\boutpost_[a-z0-9_]+/g) ?? [])];

/** Every PromQL expression of the dashboard: its panels' targets and its query variables. */
function dashboardQueries(): { where: string; expr: string }[] {
  const d = JSON.parse(readFileSync(join(ROOT, "deploy/grafana/outpost.json"), "utf8")) as any;
  const out: { where: string; expr: string }[] = [];
  const walk = (panels: any[]) => {
    for (const p of panels ?? []) {
      for (const t of p.targets ?? []) out.push({ where: `panel '${p.title}'`, expr: t.expr });
      walk(p.panels);
    }
  };
  walk(d.panels);
  for (const v of d.templating?.list ?? []) if (v.type === "query") out.push({ where: `variable '${v.name}'`, expr: typeof v.query === "string" ? v.query : v.query.query });
  return out;
}

function alertRules(): any[] {
  const doc = Bun.YAML.parse(readFileSync(join(ROOT, "deploy/prometheus/alerts.yml"), "utf8")) as any;
  return doc.groups.flatMap((g: any) => g.rules);
}

describe("deploy/", () => {
  test("the registries hold what the dashboard is about (the check below is not vacuous)", () => {
    for (const n of ["outpost_http_requests_total", "outpost_build_info", "outpost_db_query_seconds", "outpost_sync_edges_connected", "outpost_sync_link_up", "outpost_system_http_requests_total", "outpost_service_runs_total"])
      expect(exposed.has(n)).toBe(true);
    expect(isExposed("outpost_http_request_seconds_bucket")).toBe(true);
    expect(isExposed("outpost_http_requests_total_bucket")).toBe(false);
    expect(isExposed("outpost_no_such_metric")).toBe(false);
  });

  test("the Grafana dashboard's queries name existing metrics only", () => {
    const queries = dashboardQueries();
    expect(queries.length).toBeGreaterThan(20);
    const unknown = queries.flatMap((q) => namesIn(q.expr).filter((n) => !isExposed(n)).map((n) => `${q.where}: ${n}`));
    expect(unknown).toEqual([]);
    for (const q of queries) expect(namesIn(q.expr).length).toBeGreaterThan(0);
  });

  test("the alert rules name existing metrics only, each with a severity and a summary", () => {
    const rules = alertRules();
    expect(rules.length).toBeGreaterThan(10);
    const unknown = rules.flatMap((r) => namesIn(r.expr).filter((n) => !isExposed(n)).map((n) => `${r.alert}: ${n}`));
    expect(unknown).toEqual([]);
    for (const r of rules) {
      expect(typeof r.alert).toBe("string");
      expect(["critical", "warning", "info"]).toContain(r.labels?.severity);
      expect(typeof r.annotations?.summary).toBe("string");
      // up{} is Prometheus' own; every other rule watches an Outpost metric
      if (r.alert !== "OutpostDown") expect(namesIn(r.expr).length).toBeGreaterThan(0);
    }
  });
});
