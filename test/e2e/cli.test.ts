// The binary's command line: help, version, flag validation, precedence, edge flags.
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { freePort, request, runBin, startOutpost } from "./harness.ts";

t.test("--help prints the flags and exits 0", async (t) => {
  for (const flag of ["--help", "-help", "-h"]) {
    const r = await runBin([flag]);
    t.equal(r.code, 0, flag);
    t.match(r.stdout, /--mode platform\|edge/);
    t.match(r.stdout, /--platform-url/);
  }
});

t.test("--version prints the version", async (t) => {
  const r = await runBin(["--version"]);
  t.equal(r.code, 0);
  t.match(r.stdout, /^outpost \d+\.\d+\.\d+/);
});

t.test("bad command lines exit 2 and say what is wrong", async (t) => {
  const cases: [string[], RegExp][] = [
    [["--bogus"], /unknown flag --bogus/],
    [["--mode", "cloud"], /--mode/],
    [["--http-port", "notaport"], /--http-port/],
    [["--http-port", "70000"], /--http-port/],
    [["--log-level", "loud"], /--log-level/],
    [["--http-port"], /needs a value/],
    [["stray"], /unexpected argument 'stray'/],
    [["--mode", "edge"], /--platform-url: required in edge mode[\s\S]*--system-key[\s\S]*--edge-name[\s\S]*--edge-token/],
    [["--mode", "edge", "--platform-url", "not a url", "--system-key", "abc123abc123abc123abc123", "--edge-name", "e", "--edge-token", "t"], /--platform-url/],
    [["--mode", "edge", "--platform-url", "http://x:9000", "--system-key", "NOT-HEX", "--edge-name", "e", "--edge-token", "t"], /--system-key/],
    [["--tls-cert", "/x.pem"], /--tls-cert and --tls-key go together/],
    [["--config", "/nonexistent/outpost.json"], /cannot read config file/],
  ];
  for (const [args, re] of cases) {
    const r = await runBin(args);
    t.equal(r.code, 2, args.join(" "));
    t.match(r.stderr, re, args.join(" "));
    t.notMatch(r.stderr, /\bat \S+:\d+:\d+/, "no stack trace");
  }
});

t.test("a config file that is not valid JSON exits 2", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "outpost-cfg-"));
  writeFileSync(join(dir, "bad.json"), "{ not json");
  const r = await runBin(["--config", join(dir, "bad.json")]);
  t.equal(r.code, 2);
  t.match(r.stderr, /not valid JSON/);
  writeFileSync(join(dir, "unknown.json"), JSON.stringify({ httpPort: 1, flavour: "x" }));
  const u = await runBin(["--config", join(dir, "unknown.json")]);
  t.equal(u.code, 2);
  t.match(u.stderr, /unknown setting: flavour/);
});

t.test("starts from an empty directory on embedded defaults and creates its database under --data-dir", async (t) => {
  const o = await startOutpost({ defaultDb: true });
  t.teardown(() => o.stop());
  const r = await request(o.url, "GET", "/health");
  t.equal(r.status, 200);
  t.ok(existsSync(join(o.dataDir, "outpost.db")), "libSQL file under the data dir");
  const code = await o.stop();
  t.equal(code, 0, "SIGTERM stops it cleanly");
});

t.test("precedence: flags > env > config file > defaults", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "outpost-prec-"));
  const [filePort, envPort, flagPort] = await Promise.all([freePort(), freePort(), freePort()]);
  writeFileSync(join(dir, "c.json"), JSON.stringify({ httpPort: filePort, logLevel: "warn" }));
  // the harness passes --http-port itself; start without it by using waitForHealth: false and our own args
  const base = ["--data-dir", dir, "--mqtt-port", String(await freePort()), "--mqtt-ws-port", String(await freePort()), "--http-host", "127.0.0.1"];
  const { spawn } = await import("node:child_process");
  const { BIN } = await import("./harness.ts");
  async function upOn(args: string[], env: Record<string, string>, port: number) {
    const p = spawn(BIN, [...base, ...args], { env: { PATH: process.env.PATH ?? "", TMPDIR: "/tmp", ...env }, stdio: "ignore" });
    try {
      for (let i = 0; i < 300; i++) {
        try { if ((await request(`http://127.0.0.1:${port}`, "GET", "/health")).status === 200) return true; } catch { /* not yet */ }
        await new Promise((r) => setTimeout(r, 20));
      }
      return false;
    } finally {
      p.kill("SIGKILL");
      await new Promise((r) => p.on("exit", r));
    }
  }
  t.ok(await upOn(["--config", join(dir, "c.json")], {}, filePort), "config file port used");
  t.ok(await upOn(["--config", join(dir, "c.json")], { OUTPOST_HTTP_PORT: String(envPort) }, envPort), "env beats file");
  t.ok(await upOn(["--config", join(dir, "c.json"), "--http-port", String(flagPort)], { OUTPOST_HTTP_PORT: String(envPort) }, flagPort), "flag beats env");
  t.ok(await upOn([`-http-port=${flagPort}`], {}, flagPort), "single dash with = works");
});

t.test("edge mode starts its local API with the flags existing edge installs use", async (t) => {
  const o = await startOutpost({
    args: ["--mode", "edge", "-edge-id=gw1", "-edge-cookie=secret-cookie", "-parent-system=0123456789abcdef0123456789", "-platform-ip=127.0.0.1", "-platform-port=1"],
  });
  t.teardown(() => o.stop());
  const r = await request(o.url, "GET", "/api/about");
  t.equal(r.status, 200);
  t.equal(r.body.buildId, "edge");
});
