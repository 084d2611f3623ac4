// The sandbox on its own: what crosses into a run (req from a cached caller context and fresh
// parameters) and what comes back (text, JSON, errors), through the direct C-API call path.
import { afterAll, describe, expect, test } from "bun:test";
import { type RunRequest, Sandbox } from "../../../src/code/sandbox.ts";

const LIMITS = { memoryBytes: 32 << 20, sliceMs: 500 };
const hooks = { host: async () => null, log: () => {} };
const opened: Sandbox[] = [];

async function sandbox(code: string): Promise<Sandbox> {
  const sb = await Sandbox.create({ libraries: [], service: { name: "svc", code }, meta: {} }, LIMITS);
  opened.push(sb);
  return sb;
}
afterAll(() => { for (const s of opened) s.dispose(); });

const context = (user: string) => ({
  systemKey: "sk", systemSecret: "secret", userEmail: `${user}@example.com`, userid: user, userToken: `tok-${user}`, isLogging: false,
  caller: { userid: user, userEmail: `${user}@example.com`, userToken: `tok-${user}` },
});
const req = (user: string, params: unknown = {}): RunRequest => ({ context: JSON.stringify(context(user)), params, instanceId: crypto.randomUUID() });

describe("Sandbox runs", () => {
  test("req carries the caller's context, the parameters and the instance id, in the wire order", async () => {
    const sb = await sandbox("function svc(req, resp){ resp.success(req) }");
    const r = req("alice", { n: 1 });
    const o = await sb.run("svc", r, hooks, 5_000);
    expect(o.kind).toBe("success");
    const value = (o as { value: Record<string, unknown> }).value;
    expect(Object.keys(value)).toEqual(["systemKey", "systemSecret", "userEmail", "userid", "userToken", "params", "isLogging", "service_instance_id", "caller"]);
    expect(value).toEqual({ ...context("alice"), params: { n: 1 }, service_instance_id: r.instanceId });
  });

  test("each run sees its own caller when callers alternate, and a run's changes to req do not reach the next run", async () => {
    const sb = await sandbox("function svc(req, resp){ var seen = req.userid + '/' + req.caller.userEmail + '/' + req.params.i; req.userid = 'changed'; req.caller.userEmail = 'changed'; delete req.systemKey; resp.success(seen + '/' + typeof req.systemKey) }");
    for (let i = 0; i < 6; i++) {
      const user = i % 3 === 2 ? "bob" : "alice"; // same caller twice in a row, then another
      const o = await sb.run("svc", req(user, { i }), hooks, 5_000);
      expect(o).toMatchObject({ kind: "success", value: `${user}/${user}@example.com/${i}/undefined` });
    }
  });

  test("strings come back as text, other values as JSON, resp.error as an error", async () => {
    const sb = await sandbox("function svc(req, resp){ var p = req.params; if (p.err) resp.error(p.v); resp.success(p.v) }");
    for (const v of ["plain", "", "j{not json", "s", "ünïcødé ✓ 日本", 42, 0, null, true, { a: [1, "x"] }, ["t", "j"]]) {
      expect(await sb.run("svc", req("u", { v }), hooks, 5_000)).toMatchObject({ kind: "success", value: v });
      expect(await sb.run("svc", req("u", { v, err: true }), hooks, 5_000)).toMatchObject({ kind: "error", value: v });
    }
  });

  test("text results of every length around the short-text read come back intact, ASCII or not", async () => {
    const sb = await sandbox("function svc(req, resp){ resp.success(req.params.v) }");
    for (const n of [0, 1, 62, 63, 64, 65, 66, 200, 5_000]) {
      for (const v of ["a".repeat(n), "a".repeat(n) + "é", "ü" + "a".repeat(n), "a".repeat(Math.max(0, n - 1)) + "✓" + "b".repeat(3)]) {
        expect(await sb.run("svc", req("u", { v }), hooks, 5_000)).toMatchObject({ kind: "success", value: v });
      }
    }
  });

  test("missing or empty parameters are a fresh {} each run; other parameters cross as they are", async () => {
    const sb = await sandbox("function svc(req, resp){ var seen = JSON.stringify(req.params); req.params.mark = 1; resp.success(seen) }");
    for (const [params, seen] of [[undefined, "{}"], [null, "{}"], [{}, "{}"], [{}, "{}"], [[1, 2], "[1,2]"], [{ a: null }, '{"a":null}'], [Object.create(null), "{}"]] as const) {
      expect(await sb.run("svc", { context: JSON.stringify(context("u")), params, instanceId: crypto.randomUUID() }, hooks, 5_000)).toMatchObject({ kind: "success", value: seen });
    }
  });

  test("a service that returns without answering succeeds with null; a string it returns is not an answer", async () => {
    const sb = await sandbox("function svc(req, resp){ return 'st-not-an-answer' }");
    expect(await sb.run("svc", req("u"), hooks, 5_000)).toMatchObject({ kind: "success", value: null });
  });

  test("large and multi-byte parameters cross intact (the scratch buffer grows)", async () => {
    const sb = await sandbox("function svc(req, resp){ resp.success(req.params.s.length + ':' + req.params.s.slice(-3)) }");
    for (const s of ["é".repeat(3_000), "日本語".repeat(20_000), "x".repeat(200_000)]) {
      expect(await sb.run("svc", req("u", { s }), hooks, 5_000)).toMatchObject({ kind: "success", value: `${s.length}:${s.slice(-3)}` });
    }
  });

  test("runs keep working after the wasm memory grew", async () => {
    const sb = await sandbox("var keep = []; function svc(req, resp){ if (req.params.grow) { for (var i = 0; i < 20; i++) keep.push(new Uint8Array(1 << 20)) } resp.success(keep.length) }");
    expect(await sb.run("svc", req("u", { grow: true }), hooks, 5_000)).toMatchObject({ kind: "success", value: 20 });
    expect(await sb.run("svc", req("v", {}), hooks, 5_000)).toMatchObject({ kind: "success", value: 20 });
  });

  test("a thrown error is a failed run with its message; an async answer still arrives", async () => {
    const bad = await sandbox("function svc(req, resp){ throw new TypeError('sensor ' + req.params.id + ' offline') }");
    expect(await bad.run("svc", req("u", { id: 7 }), hooks, 5_000)).toEqual({ kind: "failed", error: "TypeError: sensor 7 offline" });
    expect(bad.broken).toBe(true);
    const later = await sandbox("async function svc(req, resp){ await null; resp.success('later ' + req.userid) }");
    expect(await later.run("svc", req("carol"), hooks, 5_000)).toMatchObject({ kind: "success", value: "later carol" });
    expect(await later.run("svc", req("dave"), hooks, 5_000)).toMatchObject({ kind: "success", value: "later dave" });
  });
});
