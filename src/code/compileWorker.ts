// The compile check's thread (syntax.ts): compiles the code it is sent, one check at a time, and
// answers with the problem (null: it compiles).
import type { CompileCheck } from "../domain/services.ts";
import { compileHere } from "./syntax.ts";

declare const self: Worker;

let check: CompileCheck | null = null;

self.onmessage = async (e: MessageEvent) => {
  const m = e.data as { id: number; code: string; file: string; memoryBytes: number };
  check ??= compileHere(m.memoryBytes);
  // a check that fails here (not the code: the check itself) passes, as the main thread expects
  const problem = await check(m.code, m.file).catch(() => null);
  postMessage({ id: m.id, problem });
};
