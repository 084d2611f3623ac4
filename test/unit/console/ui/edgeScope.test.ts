import { describe, expect, test } from "bun:test";
import { EDGE_PAGES, ownedReason, scopeOf } from "../../../../src/console/ui/edgeScope.ts";

const asset = (asset_type: string, asset_name: string, status = "synced", source = "edge", mode = "sync_to_edge") => ({ asset_type, asset_name, status, source, mode });

describe("what an edge's console shows read-only", () => {
  test("the assets the edge holds from its platform, by type and name; one that failed to apply is not held", () => {
    const scope = scopeOf({ edge: "gw1", system_key: "sk", assets: [asset("service", "a"), asset("collection", "a", "synced", "edge", "sync"), asset("service", "b", "failed")] });
    expect(scope.edge).toBe("gw1");
    expect(scope.systemKey).toBe("sk");
    expect([...scope.assets.keys()].sort()).toEqual(["collection/a", "service/a"]);
    expect(scope.assets.get("collection/a")?.mode).toBe("sync");
  });

  test("why: the deployment that brings it, else the template", () => {
    expect(ownedReason(asset("service", "a", "synced", "template:plant"))).toBe("From the platform's template: change it there.");
    expect(ownedReason(asset("service", "a", "synced", "edge"))).toBe("From the platform's template: change it there.");
    expect(ownedReason(asset("service", "a", "synced", "edge,deployment:pumps"))).toBe("From the platform's deployment pumps: change it there.");
  });

  test("an edge serves its system's pages, not the platform's own (edges, deployments, settings, throttling)", () => {
    for (const p of ["collections", "services", "libraries", "roles", "users", "devices", "audit"]) expect(EDGE_PAGES.has(p)).toBe(true);
    for (const p of ["edge", "deployments", "settings", "throttling"]) expect(EDGE_PAGES.has(p)).toBe(false);
  });
});
