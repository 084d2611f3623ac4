// Deployment assets as template entries (ClearBlade's class strings onto Outpost's kinds) and the
// union of an edge's template with its deployments: what goes down, what comes up.
import { describe, expect, test } from "bun:test";
import { DEFINITION_TYPES } from "../../../src/core/syncKinds.ts";
import { ASSET_CLASSES, deployedTo, entryOf, modeOf, type TemplateEntry, unite } from "../../../src/domain/templateEntries.ts";
import { entryFor, goesDown, upCollections } from "../../../src/sync/assets.ts";

const asset = (asset_class: string, asset_id = "", sync_to_edge = false, sync_to_platform = false) => ({ asset_class, asset_id, sync_to_edge, sync_to_platform });
const e = (def_module: TemplateEntry["def_module"], def_name: string, mode: TemplateEntry["mode"], source = "edge", rows?: boolean): TemplateEntry =>
  ({ def_module, def_name, mode, source, ...(rows === undefined ? {} : { rows }) });

describe("asset classes", () => {
  test("each ClearBlade class names a kind Outpost syncs; both adapter spellings; roles as rolesperms too", () => {
    for (const kind of Object.values(ASSET_CLASSES)) expect(DEFINITION_TYPES).toContain(kind);
    expect(ASSET_CLASSES).toMatchObject({ services: "service", libraries: "library", triggers: "trigger", timers: "timer", roles: "role", rolesperms: "role",
      users: "user", devices: "device", adaptors: "adapter", adapters: "adapter", portals: "portal", plugins: "plugin", servicecaches: "servicecache", webhooks: "webhook", usersecrets: "usersecret" });
    // not deployable here: said so by the domain, never read as a collection's name
    expect(ASSET_CLASSES.bucketsets).toBe("bucketset");
    expect(ASSET_CLASSES.usersecrets).toBe("usersecret");
  });

  test("the flags are the modes: neither is deploy, both are sync", () => {
    expect(modeOf(false, false)).toBe("deploy");
    expect(modeOf(true, false)).toBe("sync_to_edge");
    expect(modeOf(false, true)).toBe("sync_to_platform");
    expect(modeOf(true, true)).toBe("sync");
  });

  test("an asset becomes a template entry: \"\" is every asset of the class, an unknown class a collection with its rows", () => {
    expect(entryOf(asset("services", "calc", true), "d1")).toEqual({ def_module: "service", def_name: "calc", mode: "sync_to_edge", source: "deployment:d1" });
    expect(entryOf(asset("servicecaches", "", true, true), "d1")).toEqual({ def_module: "servicecache", def_name: "*", mode: "sync", source: "deployment:d1" });
    expect(entryOf(asset("readings", "", false, true), "d2")).toEqual({ def_module: "collection", def_name: "readings", mode: "sync_to_platform", rows: true, source: "deployment:d2" });
  });
});

describe("the union of a template and deployments", () => {
  test("with nothing deployed the template is unchanged (same entries, same order)", () => {
    const t = [e("service", "*", "sync_to_edge"), e("collection", "readings", "sync", "edge", false)];
    expect(unite(t, [])).toBe(t);
  });

  test("an asset brought by both goes down and comes up when either says so, and names both sources", () => {
    const t = [e("collection", "readings", "sync_to_edge", "template:base", true)];
    const d = [entryOf(asset("readings", "", false, true), "d1")];
    const u = unite(t, d);
    expect(u).toEqual([{ def_module: "collection", def_name: "readings", mode: "sync", rows: true, source: "template:base,deployment:d1" }]);
    expect(goesDown(u, "row", "readings", true)).toBe(true);
    expect(upCollections(u, ["readings"])).toEqual(["readings"]);
  });

  test("a deploy-only asset in one source is kept in sync by the other's class-wide entry", () => {
    const t = [e("service", "calc", "deploy")];
    const d = [entryOf(asset("services", "", true), "d1")];
    const u = unite(t, d);
    expect(entryFor(u, "service", "calc")!.mode).toBe("sync_to_edge");
    expect(goesDown(u, "service", "calc", true)).toBe(true);
    // and every other service comes through the deployment alone
    expect(entryFor(u, "service", "other")!.source).toBe("deployment:d1");
  });

  test("within one template an edge's own entry still overrides its named template's *", () => {
    // (the edge's own template is built before the union; the union does not re-merge it)
    const t = [e("service", "*", "sync", "template:base"), e("service", "calc", "deploy")];
    expect(unite(t, [e("timer", "tick", "deploy", "deployment:d1")]).find((x) => x.def_name === "calc")!.mode).toBe("deploy");
  });

  test("two deployments: removing an asset from one keeps it while the other covers it", () => {
    const both = [entryOf(asset("services", "calc", true), "d1"), entryOf(asset("services", "calc", true), "d2")].reduce((acc, x) => unite(acc, [x]), [] as TemplateEntry[]);
    expect(both).toEqual([{ def_module: "service", def_name: "calc", mode: "sync_to_edge", source: "deployment:d1,deployment:d2" }]);
    const onlyD2 = [entryOf(asset("services", "calc", true), "d2")];
    expect(goesDown(onlyD2, "service", "calc", true)).toBe(true);
    expect(goesDown([], "service", "calc", false)).toBe(false);
  });

  test("topics unite by their filter only (a topic entry's * is no wildcard for others)", () => {
    const u = unite([e("topic", "a/#", "sync_to_platform")], [e("topic", "b/+", "sync_to_platform", "deployment:d1")]);
    expect(u.map((x) => x.def_name).sort()).toEqual(["a/#", "b/+"]);
  });
});

describe("the entries of an edge's deployments", () => {
  const row = (name: string, edges: string[], assets: ReturnType<typeof asset>[]) => ({ name, edges: JSON.stringify(edges), assets: JSON.stringify(assets) });
  const rows = [
    row("d1", ["gw"], [asset("services", "calc"), asset("readings", "", false, true)]),
    row("d2", ["gw", "other"], [asset("services", "", true)]),
    row("d3", ["gw"], [asset("services", "calc", false, false), asset("readings", "", true)]),
    row("d4", ["other"], [asset("timers", "", true)]),
  ];
  test("only deployments naming the edge count", () => {
    expect(deployedTo(rows, "nobody")).toEqual([]);
    expect(deployedTo(rows, "other").map((e) => `${e.def_module}/${e.def_name}`).sort()).toEqual(["service/*", "timer/*"]);
  });

  test("folded in one pass as the pairwise union folds them", () => {
    const pairwise = rows.filter((r) => (JSON.parse(r.edges) as string[]).includes("gw"))
      .flatMap((r) => (JSON.parse(r.assets) as ReturnType<typeof asset>[]).map((a) => entryOf(a, r.name)))
      .reduce((acc, x) => unite(acc, [x]), [] as TemplateEntry[]);
    const norm = (t: TemplateEntry[]) => t.map((e) => ({ ...e, source: e.source!.split(",").sort().join(",") })).sort((a, b) => `${a.def_module}/${a.def_name}`.localeCompare(`${b.def_module}/${b.def_name}`));
    const one = deployedTo(rows, "gw");
    expect(norm(one)).toEqual(norm(pairwise));
    expect(one.find((e) => e.def_name === "calc")!.mode).toBe("sync_to_edge");
    expect(one.find((e) => e.def_name === "readings")).toMatchObject({ mode: "sync", rows: true });
  });
});
