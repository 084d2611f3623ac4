// Smoke test of a built binary: run it from an empty directory (arm64 under qemu-user, the x64
// baseline one under qemu-user as a CPU without AVX2), wait for /health, register a developer
// (touches libSQL), stop it.
//   bun scripts/smoke.ts dist/outpost-linux-x64
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const bin = resolve(process.argv[2] ?? "dist/outpost-linux-x64");
const arm = bin.includes("arm64") && process.arch !== "arm64";
// Nehalem: the last Intel core before AVX; the baseline build must not need more
const baseline = bin.includes("baseline");
const emulated = arm || baseline;
const dir = mkdtempSync(join(tmpdir(), "outpost-smoke-"));
// below the kernel's ephemeral range (32768 and up), where outgoing connections take ports
const port = 10000 + Math.floor(Math.random() * 20000);
const cmd = [...(arm ? ["qemu-aarch64-static", "-L", "/usr/aarch64-linux-gnu"] : baseline ? ["qemu-x86_64-static", "-cpu", "Nehalem"] : []), bin,
  "--http-port", String(port), "--mqtt-port", String(port + 1), "--mqtt-ws-port", String(port + 2), "--log-level", "warn"];
const t0 = performance.now();
const p = Bun.spawn(cmd, { cwd: dir, env: { PATH: process.env.PATH ?? "", TMPDIR: dir }, stdout: "inherit", stderr: "inherit" });
// emulated arm64 on a busy machine starts many times slower than native
const limitS = emulated ? 120 : 30;
let ok = false;
try {
  while (!ok && performance.now() - t0 < limitS * 1000) {
    if (p.exitCode !== null) throw new Error(`it exited with status ${p.exitCode}`);
    try { ok = (await fetch(`http://127.0.0.1:${port}/health`)).status === 200; } catch { await Bun.sleep(50); }
  }
  if (!ok) throw new Error(`no /health within ${limitS} s`);
  const up = Math.round(performance.now() - t0);
  const reg = await fetch(`http://127.0.0.1:${port}/admin/reg`, { method: "POST", body: JSON.stringify({ email: "smoke@example.com", password: "pw" }) });
  const body = (await reg.json()) as { dev_token?: string };
  if (reg.status !== 200 || !body.dev_token) throw new Error(`register failed: ${reg.status} ${JSON.stringify(body)}`);
  console.log(`smoke ok: ${bin}${arm ? " (qemu)" : baseline ? " (qemu, -cpu Nehalem)" : ""}, first 200 after ${up} ms`);
} catch (e) {
  console.error(`smoke FAILED: ${bin}: ${(e as Error).message}`);
  process.exitCode = 1;
} finally {
  p.kill("SIGKILL");
  await p.exited;
  rmSync(dir, { recursive: true, force: true });
}
