// The route registry (src/http/routeGroups.ts): every route file registered by one line there,
// and the order of the groups of no consequence, since no two routes share a method and a path shape.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { createHttpApp } from "../../../src/http/server.ts";
import { standIn } from "./standIn.ts";
import * as routeGroups from "../../../src/http/routeGroups.ts";

const HTTP_DIR = resolve(import.meta.dir, "../../../src/http");

/** Routes that one method and one path shape (parameter names aside) would route alike. */
function clashes(routes: { method: string; path: string }[]): string[][] {
  const byShape = new Map<string, string[]>();
  for (const r of routes) {
    const shape = `${r.method} ${r.path.replace(/:[^/]+/g, ":")}`;
    byShape.set(shape, [...(byShape.get(shape) ?? []), `${r.method} ${r.path}`]);
  }
  return [...byShape.values()].filter((rs) => rs.length > 1);
}

describe("route registry", () => {
  test("every route file is registered by one line of routeGroups.ts, and each line names a route group", () => {
    const files = readdirSync(resolve(HTTP_DIR, "routes")).filter((f) => f.endsWith(".ts")).sort();
    const lines = readFileSync(resolve(HTTP_DIR, "routeGroups.ts"), "utf8").split("\n").filter((l) => l.startsWith("export"));
    const registered = lines.map((l) => /^export \{ \w+ \} from "\.\/routes\/([\w.]+)";$/.exec(l)?.[1] ?? `malformed: ${l}`).sort();
    expect(registered).toEqual(files);
    expect(Object.keys(routeGroups).length).toBe(files.length);
    for (const group of Object.values(routeGroups)) expect(typeof group).toBe("function");
  });

  test("no two routes share a method and a path shape, so the groups may mount in any order", () => {
    const routes = createHttpApp(standIn()).routes as { method: string; path: string }[];
    expect(routes.length).toBeGreaterThan(200);
    expect(clashes(routes)).toEqual([]);
  });

  test("the clash check finds routes that differ only in a parameter's name", () => {
    expect(clashes([
      { method: "GET", path: "/admin/x/:systemKey/:name" }, { method: "GET", path: "/admin/x/:sk/:id" },
      { method: "PUT", path: "/admin/x/:systemKey/:name" }, { method: "GET", path: "/admin/x/:systemKey/all" },
    ])).toEqual([["GET /admin/x/:systemKey/:name", "GET /admin/x/:sk/:id"]]);
  });
});
