// The code engine's flags: defaults, values from flags and the environment, refusals; and how the
// pool turns them into workers, heaps and shares.
import { describe, expect, test } from "bun:test";
import { WorkerPool } from "../../../src/code/pool.ts";
import { ConfigError, loadConfig } from "../../../src/config.ts";
import { createLogger } from "../../../src/core/log.ts";

const load = (argv: string[], env: Record<string, string | undefined> = {}) => loadConfig(argv, env);
const pool = (workers: number, memoryMb: number, maxShare = 0.5) =>
  new WorkerPool({ workers, memoryMb, maxShare, sandboxMemoryMb: 64, sliceMs: 500, queueMax: 256, log: createLogger("silent") });

describe("code engine flags", () => {
  test("defaults: workers from the cores, 256 MB, half the workers per system, 256 waiting runs", () => {
    const c = load([]);
    expect(c.codeWorkers).toBeUndefined();
    expect(c).toMatchObject({ codeMemoryMb: 256, codeMaxShare: 0.5, codeQueue: 256, codeMemoryLimitMb: 64, codeSliceMs: 500 });
  });

  test("flags and the environment set them", () => {
    expect(load(["--code-workers", "4", "--code-memory-mb", "512", "--code-max-share", "0.25", "--code-queue", "10"]))
      .toMatchObject({ codeWorkers: 4, codeMemoryMb: 512, codeMaxShare: 0.25, codeQueue: 10 });
    expect(load([], { OUTPOST_CODE_MAX_SHARE: "1", OUTPOST_CODE_WORKERS: "3" })).toMatchObject({ codeMaxShare: 1, codeWorkers: 3 });
    expect(load(["--code-max-share=.75"]).codeMaxShare).toBe(0.75);
  });

  test("out of range or not numbers are refused, naming the flag", () => {
    for (const argv of [["--code-max-share", "0"], ["--code-max-share", "1.5"], ["--code-max-share", "half"], ["--code-workers", "0"],
      ["--code-memory-mb", "16"], ["--code-queue", "0"], ["--code-workers", "2.5"]]) {
      let thrown: unknown;
      try { load(argv); } catch (e) { thrown = e; }
      expect(thrown).toBeInstanceOf(ConfigError);
      expect(String((thrown as Error).message)).toContain(argv[0]!);
    }
  });

  test("the pool: each worker's heap is its share of the budget, fewer workers when the budget is short, a system holds a share of them", () => {
    expect(pool(2, 256)).toMatchObject({ workers: 2, shareBytes: 128 << 20, maxHold: 1 });
    expect(pool(4, 256)).toMatchObject({ workers: 4, shareBytes: 64 << 20, maxHold: 2 });
    expect(pool(16, 256)).toMatchObject({ workers: 8, shareBytes: 32 << 20, maxHold: 4 });
    expect(pool(3, 256, 0.5).maxHold).toBe(1);
    expect(pool(1, 256, 0.5).maxHold).toBe(1);
    expect(pool(4, 256, 1).maxHold).toBe(4);
    // budgets past 2 GB (a shift by 20 bits overflowed there, and every sandbox failed to open)
    expect(pool(2, 4096)).toMatchObject({ workers: 2, shareBytes: 2048 * 1048576 });
  });
});

describe("--code-egress-allow", () => {
  test("empty by default; from a flag, the environment or a config file's list", () => {
    expect(load([]).codeEgressAllow).toBe("");
    expect(load(["--code-egress-allow", "127.0.0.1,10.0.0.0/8,api.internal"]).codeEgressAllow).toBe("127.0.0.1,10.0.0.0/8,api.internal");
    expect(load([], { OUTPOST_CODE_EGRESS_ALLOW: "fd00::/8" }).codeEgressAllow).toBe("fd00::/8");
    const file = `${process.env.TMPDIR ?? "/tmp"}/outpost-egress-${process.pid}.toml`;
    require("node:fs").writeFileSync(file, 'code-egress-allow = ["127.0.0.1", "*.corp.example"]\n');
    try { expect(load(["--config", file]).codeEgressAllow).toBe("127.0.0.1,*.corp.example"); }
    finally { require("node:fs").rmSync(file); }
  });

  test("a wrong entry is a configuration error naming the flag, the entry and why", () => {
    for (const [value, why] of [["10.0.0.0/33", "the prefix '/33'"], ["127.0.0.1,300.1.1.1", "'300.1.1.1' is not"], ["a b", "'a b' is not a host name"], ["10.1.0.0/8", "did you mean 10.0.0.0/8?"]]) {
      let thrown: unknown;
      try { load(["--code-egress-allow", value!]); } catch (e) { thrown = e; }
      expect(thrown).toBeInstanceOf(ConfigError);
      expect((thrown as Error).message).toStartWith("--code-egress-allow: ");
      expect((thrown as Error).message).toContain(why!);
    }
  });
});
