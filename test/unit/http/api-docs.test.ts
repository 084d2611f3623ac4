// docs/api.md lists every route the HTTP app registers, with its auth and statuses: a route added
// without documentation, or documentation left behind by a removed route, fails here.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { createHttpApp } from "../../../src/http/server.ts";
import { standIn } from "./standIn.ts";

const AUTH = new Set(["none", "optional", "token", "developer", "edge"]);
const ROW = /^\| (GET|POST|PUT|PATCH|DELETE|WS) \| `([^`]+)` \| ([a-z]+) \| (.+) \|$/;

const registered = () => (createHttpApp(standIn()).routes as { method: string; path: string }[]).map((r) => `${r.method} ${r.path}`);

function documented() {
  // a route row starts with an upper-case method; the other tables (auth, statuses) do not
  const rows = readFileSync(new URL("../../../docs/api.md", import.meta.url), "utf8").split("\n").filter((l) => /^\| [A-Z]+ \|/.test(l) && !l.startsWith("| Method"));
  return rows.map((l) => {
    const m = ROW.exec(l);
    if (!m) throw new Error(`docs/api.md: a route row must read | METHOD | \`path\` | auth | statuses |: ${l}`);
    return { route: `${m[1]} ${m[2]}`, auth: m[3]!, statuses: m[4]! };
  });
}

describe("docs/api.md", () => {
  test("lists every registered route, and only those", () => {
    const app = new Set(registered());
    const docs = documented().map((d) => d.route);
    expect(app.size).toBeGreaterThan(200);
    expect(docs.filter((r) => !app.has(r))).toEqual([]);
    expect([...app].filter((r) => !docs.includes(r))).toEqual([]);
  });

  test("each route once, with a known auth and its statuses", () => {
    const docs = documented();
    expect(docs.map((d) => d.route).filter((r, i, all) => all.indexOf(r) !== i)).toEqual([]);
    for (const d of docs) {
      expect(AUTH.has(d.auth)).toBe(true);
      expect(d.statuses).toMatch(/\b[1-5]\d\d\b|service's status/);
    }
  });
});
