// Parts meet at declared points: a part says what changed through the signals (src/core/signals.ts)
// and gets what a later part provides through a port given at its construction
// (src/core/port.ts). None assigns another object's members once it is built: not app.ts, not the
// cluster (which replaces no method of another part), not a part through its dependencies; and no
// class of src/domain has a public field holding a function (a hook someone would assign).
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import ts from "typescript";

const SRC = resolve(import.meta.dir, "../../src");

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    // the sandbox's prelude is JavaScript for the sandbox, the console's UI a browser program
    if (e.isDirectory()) { if (p !== join(SRC, "code/prelude") && p !== join(SRC, "console/ui")) sourceFiles(p, out); }
    else if (e.name.endsWith(".ts") && !e.name.endsWith(".d.ts")) out.push(p);
  }
  return out;
}

/** "file:target" of each assignment found by `pattern` (its first group: the target). */
function assignments(pattern: RegExp, files: string[]): string[] {
  const found: string[] = [];
  for (const f of files) {
    for (const line of readFileSync(f, "utf8").split("\n")) {
      const m = pattern.exec(line);
      if (m) found.push(`${relative(SRC, f)}:${m[1]}`);
    }
  }
  return found;
}

/** Objects of libraries and of the runtime, assigned through their own API (event handlers of a
 *  WebSocket, a Worker or a Redis client; what the broker adapts in aedes and its sockets; the
 *  entry quickjs-emscripten calls host functions through, which it offers no other way to set). */
const LIBRARY_HOOKS = new Set([
  "code/ffi.ts:callbacks.callFunction",
  "code/worker.ts:self.onmessage", "code/compileWorker.ts:self.onmessage",
  "code/pool.ts:slot.worker.onmessage", "code/pool.ts:slot.worker.onerror",
  "code/syntax.ts:w.onmessage", "code/syntax.ts:w.onerror",
  "sync/edge/link.ts:ws.onopen", "sync/edge/link.ts:ws.onmessage", "sync/edge/link.ts:ws.onclose", "sync/edge/link.ts:ws.onerror",
  "broker/listeners.ts:ws.data.kick", "broker/broker.ts:am.subscribe", "broker/broker.ts:am.unsubscribe",
  "broker/publish.ts:m.parser", "broker/publish.ts:c.deliver0", "broker/publish.ts:c.deliverQoS",
  "throttle/limiters.ts:this.cmd.onclose", "throttle/limiters.ts:this.sub.onclose",
  "cluster/redis.ts:this.cmd.onclose", "cluster/redis.ts:this.sub.onclose",
  "cluster/bus.ts:this.cmd.options.retryStrategy",
]);

/** Assignments not yet turned into a signal or a port: the next change empties this list. */
const REMAINING = new Set<string>([]);

const files = sourceFiles(SRC);
const allowed = (a: string) => !LIBRARY_HOOKS.has(a) && !REMAINING.has(a);

describe("wiring", () => {
  test("no part assigns a member of an object it reaches through its own (this.dep.member = ...)", () => {
    // (clearing an own array by its length is not wiring)
    const found = assignments(/^\s*(this\.[\w#]+(?:\??\.\w+)+)\s*(?:=|\?\?=)(?![=>])/, files).filter((a) => !a.endsWith(".length"));
    expect(found.filter(allowed)).toEqual([]);
  });

  test("app.ts, the composition per mode, main.ts, cli/main.ts and the cluster assign no member of a part they built or were given", () => {
    const composition = files.filter((f) => ["app.ts", "main.ts", "cli/main.ts"].includes(relative(SRC, f)) || relative(SRC, f).startsWith("compose/") || relative(SRC, f).startsWith("cluster/cluster"));
    expect(composition.length).toBe(7);
    expect(assignments(/^\s*([A-Za-z_$][\w$]*(?:\??\.[\w$]+)+)\s*(?:=|\?\?=)(?![=>])/, composition).filter(allowed)).toEqual([]);
    // nor replaces a method by its name
    expect(assignments(/^\s*([A-Za-z_$][\w$]*\[[^\]]+\])\s*=(?![=>])/, composition)).toEqual([]);
  });

  test("no function is assigned to a member of another object anywhere in src/ (library hooks aside)", () => {
    const fn = /^\s*([A-Za-z_$][\w$]*(?:\??\.[\w$]+)+)\s*=\s*(?:\(*\s*)?(?:async\s*)?(?:\([^)]*\)\s*(?::\s*[^=]+)?=>|[A-Za-z_$][\w$]*\s*=>|function\b)/;
    // (a part's own field may hold a function it made)
    expect(assignments(fn, files).filter((a) => !/:this\.[\w#]+$/.test(a)).filter(allowed)).toEqual([]);
  });

  test("the library hooks and the remaining assignments listed here still exist (the lists do not go stale)", () => {
    const any = /^\s*([A-Za-z_$][\w$]*(?:\??\.[\w$]+)+)\s*(?:=|\?\?=)(?![=>])/;
    const all = new Set(assignments(any, files));
    expect([...LIBRARY_HOOKS, ...REMAINING].filter((a) => !all.has(a))).toEqual([]);
  });

  test("no class of src/domain has a public field holding a function", () => {
    const domain = files.filter((f) => relative(SRC, f).startsWith("domain/"));
    const program = ts.createProgram(domain, { target: ts.ScriptTarget.ESNext, module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler, allowImportingTsExtensions: true, noEmit: true, strict: true, skipLibCheck: true });
    const checker = program.getTypeChecker();
    const found: string[] = [];
    for (const sf of program.getSourceFiles()) {
      if (!domain.includes(resolve(sf.fileName))) continue;
      const visit = (node: ts.Node) => {
        if (ts.isClassDeclaration(node)) {
          for (const m of node.members) {
            const isField = ts.isPropertyDeclaration(m);
            // constructor parameters that are properties count as fields
            const params = ts.isConstructorDeclaration(m) ? m.parameters.filter((p) => ts.getModifiers(p)?.length) : [];
            for (const decl of isField ? [m] : params) {
              const mods = ts.getModifiers(decl as ts.HasModifiers) ?? [];
              if (mods.some((x) => x.kind === ts.SyntaxKind.PrivateKeyword || x.kind === ts.SyntaxKind.ProtectedKeyword || x.kind === ts.SyntaxKind.StaticKeyword)) continue;
              if (decl.name && ts.isPrivateIdentifier(decl.name)) continue;
              const type = checker.getNonNullableType(checker.getTypeAtLocation(decl));
              if (type.getCallSignatures().length) found.push(`${relative(SRC, sf.fileName)}:${node.name?.text}.${decl.name?.getText(sf)}`);
            }
          }
        }
        ts.forEachChild(node, visit);
      };
      visit(sf);
    }
    expect(found).toEqual([]);
  }, 60_000);
});
