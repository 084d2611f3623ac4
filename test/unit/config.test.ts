// src/config.ts: flags > env (OUTPOST_*) > config file > defaults, ClearBlade edge flag spellings.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, loadConfig, parseArgs } from "../../src/config.ts";

const dir = mkdtempSync(join(tmpdir(), "outpost-config-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
function file(ext: "json" | "toml", text: string): string {
  const p = join(dir, `c${n++}.${ext}`);
  writeFileSync(p, text);
  return p;
}

const SK = "d4a8a4c60b86d3c79bf889b796ff01";
/** loadConfig with an empty environment unless one is given (never the test process's own). */
const load = (argv: string[], env: Record<string, string | undefined> = {}) => loadConfig(argv, env);

function configError(fn: () => unknown): ConfigError {
  let thrown: unknown;
  try { fn(); } catch (e) { thrown = e; }
  expect(thrown).toBeInstanceOf(ConfigError);
  return thrown as ConfigError;
}

describe("defaults", () => {
  test("an empty command line and environment give the documented defaults", () => {
    const c = load([]);
    expect(c).toMatchObject({
      mode: "platform", httpPort: 9000, httpHost: "0.0.0.0", mqttPort: 1883, mqttWsPort: 8903, mqttTlsPort: 1884,
      mqttWssPort: 8904, dataDir: "./data", db: "file:./data/outpost.db", dbDriver: "auto", logLevel: "info",
      developmentMode: false, enableDefaultThrottlers: true, enableGlobalThrottlers: false, devTokenTtl: 432000,
      help: false, version: false,
    });
    for (const k of ["platformUrl", "systemKey", "edgeName", "edgeToken", "tlsCert", "tlsKey", "adminEmail", "redisUrl"] as const) {
      expect(c[k]).toBeUndefined();
    }
  });

  test("the default database follows --data-dir; --db overrides it", () => {
    expect(load(["--data-dir", "/srv/outpost"]).db).toBe("file:/srv/outpost/outpost.db");
    expect(load(["--data-dir", "/srv/outpost/"]).db).toBe("file:/srv/outpost/outpost.db");
    expect(load(["--data-dir", "/srv/x", "--db", "libsql://db.example.com"]).db).toBe("libsql://db.example.com");
  });

  test("PostgreSQL: postgres:// and postgresql:// on a platform, --db-pool-max (10, at least 2); refused on an edge", () => {
    const url = "postgres://outpost:pw@db.internal:5432/outpost";
    expect(load(["--db", url])).toMatchObject({ db: url, dbPoolMax: 10 });
    expect(load(["--db", "postgresql://u@h/d", "--db-pool-max", "40"])).toMatchObject({ db: "postgresql://u@h/d", dbPoolMax: 40 });
    expect(load([], { OUTPOST_DB_POOL_MAX: "3" }).dbPoolMax).toBe(3);
    for (const bad of ["1", "0", "x", "1.5", "5000"]) expect(configError(() => load(["--db-pool-max", bad])).message).toContain("--db-pool-max");
    const edge = ["--mode", "edge", "--platform-url", "http://p", "--system-key", SK, "--edge-name", "e", "--edge-token", "t"];
    expect(configError(() => load([...edge, "--db", url])).message).toContain("--db: an edge keeps its data in libSQL");
    expect(configError(() => load([...edge], { OUTPOST_DB: "POSTGRESQL://u@h/d" })).message).toContain("--db: an edge keeps its data in libSQL");
    expect(load([...edge, "--db", "file:/var/lib/outpost/edge.db"]).db).toBe("file:/var/lib/outpost/edge.db");
  });

  test("loadConfig reads process.env when no environment is passed", () => {
    const old = process.env.OUTPOST_MQTT_WS_PORT;
    process.env.OUTPOST_MQTT_WS_PORT = "18903";
    try { expect(loadConfig([]).mqttWsPort).toBe(18903); } finally {
      if (old === undefined) delete process.env.OUTPOST_MQTT_WS_PORT; else process.env.OUTPOST_MQTT_WS_PORT = old;
    }
  });
});

describe("flag syntax", () => {
  test("single and double dash, --x=y and --x y", () => {
    for (const argv of [["--http-port", "9100"], ["-http-port", "9100"], ["--http-port=9100"], ["-http-port=9100"]]) {
      expect(load(argv).httpPort).toBe(9100);
    }
  });

  test("values may contain '=' and spaces", () => {
    expect(load(["--db=libsql://h/x?authToken=a=b"]).db).toBe("libsql://h/x?authToken=a=b");
    expect(load(["--data-dir", "/tmp/with space"]).dataDir).toBe("/tmp/with space");
  });

  test("a negative number is a value, not a flag", () => {
    expect(load(["--dev-token-ttl", "-1"]).devTokenTtl).toBe(-1);
  });

  test("boolean flags with and without a value", () => {
    expect(load(["--development-mode"]).developmentMode).toBe(true);
    expect(load(["-development-mode"]).developmentMode).toBe(true);
    for (const v of ["true", "1", "yes"]) {
      expect(load(["--development-mode", v]).developmentMode).toBe(true);
      expect(load([`--development-mode=${v}`]).developmentMode).toBe(true);
    }
    for (const v of ["false", "0", "no"]) {
      expect(load(["--development-mode", v]).developmentMode).toBe(false);
      expect(load([`--development-mode=${v}`]).developmentMode).toBe(false);
    }
    expect(load(["--enable-default-throttlers", "false"]).enableDefaultThrottlers).toBe(false);
    expect(load(["--enable-global-throttlers"]).enableGlobalThrottlers).toBe(true);
  });

  test("a boolean flag without a value does not swallow the next flag", () => {
    const c = load(["--development-mode", "--http-port", "9200", "--enable-global-throttlers", "--mqtt-port=1999"]);
    expect(c.developmentMode).toBe(true);
    expect(c.httpPort).toBe(9200);
    expect(c.enableGlobalThrottlers).toBe(true);
    expect(c.mqttPort).toBe(1999);
  });

  test("a flag that needs a value does not take the next flag as its value", () => {
    configError(() => load(["--data-dir", "--development-mode"]));
    configError(() => load(["--db", "--http-port=9100"]));
    configError(() => load(["--edge-token", "-h"]));
  });

  test("a value may start with '-' when it is not one of the flags (random tokens do)", () => {
    expect(parseArgs(["--edge-token", "-Ab3_x-9kQ", "--mode", "edge"]).values).toMatchObject({ edgeToken: "-Ab3_x-9kQ", mode: "edge" });
    expect(parseArgs(["--edge-token", "--mode-is-not-a-flag"]).values.edgeToken).toBe("--mode-is-not-a-flag");
  });

  test("--help / -h / --version / -v", () => {
    expect(load(["--help"]).help).toBe(true);
    expect(load(["-h"]).help).toBe(true);
    expect(load(["--version"]).version).toBe(true);
    expect(load(["-v"]).version).toBe(true);
    expect(parseArgs(["-help"]).help).toBe(true);
  });

  test("parseArgs maps kebab-case flags to setting names", () => {
    expect(parseArgs(["--mqtt-ws-port", "1", "--log-level=debug", "--db-auth-token", "t"]).values)
      .toEqual({ mqttWsPort: "1", logLevel: "debug", dbAuthToken: "t" });
  });
});

describe("precedence: flags > env > config file > defaults", () => {
  test("JSON config file", () => {
    const cfg = file("json", JSON.stringify({ httpPort: 1001, mqttPort: 1002, mqttWsPort: 1003, logLevel: "warn" }));
    const env = { OUTPOST_HTTP_PORT: "2001", OUTPOST_MQTT_PORT: "2002" };
    const c = load(["--config", cfg, "--http-port", "3001"], env);
    expect(c.httpPort).toBe(3001); // flag
    expect(c.mqttPort).toBe(2002); // env over file
    expect(c.mqttWsPort).toBe(1003); // file over default
    expect(c.logLevel).toBe("warn"); // file
    expect(c.mqttTlsPort).toBe(1884); // default
  });

  test("TOML config file", () => {
    const cfg = file("toml", `httpPort = 1001\nmqttPort = 1002\nmqtt-ws-port = 1003\ndata_dir = "/srv/toml"\ndevelopment-mode = true\n`);
    const c = load(["--config", cfg, "--http-port=3001"], { OUTPOST_MQTT_PORT: "2002" });
    expect(c.httpPort).toBe(3001);
    expect(c.mqttPort).toBe(2002);
    expect(c.mqttWsPort).toBe(1003);
    expect(c.dataDir).toBe("/srv/toml");
    expect(c.db).toBe("file:/srv/toml/outpost.db");
    expect(c.developmentMode).toBe(true);
  });

  test("env over file for booleans and strings; flags over env", () => {
    const cfg = file("json", JSON.stringify({ developmentMode: true, logLevel: "error", dataDir: "/from/file" }));
    const env = { OUTPOST_DEVELOPMENT_MODE: "false", OUTPOST_DATA_DIR: "/from/env" };
    const c = load(["--config", cfg], env);
    expect(c.developmentMode).toBe(false);
    expect(c.dataDir).toBe("/from/env");
    expect(c.logLevel).toBe("error");
    const d = load(["--config", cfg, "--development-mode", "--data-dir=/from/flag"], env);
    expect(d.developmentMode).toBe(true);
    expect(d.dataDir).toBe("/from/flag");
  });

  test("OUTPOST_CONFIG names the file; --config overrides it", () => {
    const a = file("json", JSON.stringify({ httpPort: 1111 }));
    const b = file("json", JSON.stringify({ httpPort: 2222 }));
    expect(load([], { OUTPOST_CONFIG: a }).httpPort).toBe(1111);
    expect(load(["--config", b], { OUTPOST_CONFIG: a }).httpPort).toBe(2222);
  });

  test("env names are OUTPOST_ + upper snake case; empty values are ignored", () => {
    const c = load([], {
      OUTPOST_MQTT_WSS_PORT: "1904", OUTPOST_ENABLE_GLOBAL_THROTTLERS: "true", OUTPOST_DB_DRIVER: "client",
      OUTPOST_HTTP_PORT: "", OUTPOST_LOG_LEVEL: "debug", HTTP_PORT: "1", OUTPOST_httpPort: "2",
    });
    expect(c.mqttWssPort).toBe(1904);
    expect(c.enableGlobalThrottlers).toBe(true);
    expect(c.dbDriver).toBe("client");
    expect(c.httpPort).toBe(9000);
    expect(c.logLevel).toBe("debug");
  });
});

describe("edge settings", () => {
  const edgeArgs = ["--mode", "edge", "--platform-url", "https://platform.example.com", "--system-key", SK, "--edge-name", "e1", "--edge-token", "tok"];

  test("edge mode with its four settings", () => {
    const c = load(edgeArgs);
    expect(c).toMatchObject({ mode: "edge", platformUrl: "https://platform.example.com", systemKey: SK, edgeName: "e1", edgeToken: "tok" });
  });

  test("ClearBlade edge aliases", () => {
    const c = load(["-mode=edge", "-edge-id=gw-7", "-edge-cookie=cookie123", `-parent-system=${SK}`, "-platform-ip=10.0.0.5", "-platform-port=8951"]);
    expect(c).toMatchObject({ mode: "edge", edgeName: "gw-7", edgeToken: "cookie123", systemKey: SK, platformUrl: "http://10.0.0.5:8951" });
    const d = load(["--edge-listen-port", "9101", "--broker-tcp-port", "1901", "--broker-ws-port", "1902", "--broker-tls-port", "1903", "--broker-wss-port", "1904", "--adaptors-root-dir", "/opt/adaptors"]);
    expect(d).toMatchObject({ httpPort: 9101, mqttPort: 1901, mqttWsPort: 1902, mqttTlsPort: 1903, mqttWssPort: 1904, adaptersDir: "/opt/adaptors" });
  });

  test("--platform-ip alone uses the HTTP port 9000; a URL with a scheme is kept; --novi-ip is an alias", () => {
    expect(load(["--platform-ip", "10.0.0.5"]).platformUrl).toBe("http://10.0.0.5:9000");
    expect(load(["--platform-ip", "https://p.example.com"]).platformUrl).toBe("https://p.example.com");
    expect(load(["--platform-ip", "https://p.example.com", "--platform-port", "8443"]).platformUrl).toBe("https://p.example.com:8443");
    expect(load(["--novi-ip", "platform.local", "--platform-port", "9443"]).platformUrl).toBe("http://platform.local:9443");
  });

  test("--platform-url wins over --platform-ip/--platform-port, and flags win over env", () => {
    expect(load(["--platform-ip", "10.0.0.5", "--platform-url", "https://x.example.com"]).platformUrl).toBe("https://x.example.com");
    expect(load(["--platform-ip", "10.0.0.6"], { OUTPOST_PLATFORM_URL: "https://env.example.com" }).platformUrl).toBe("http://10.0.0.6:9000");
  });

  test("--platform-port without --platform-ip is an error", () => {
    configError(() => load(["--platform-port", "8951"]));
  });

  test("edge mode requires platformUrl, systemKey, edgeName and edgeToken", () => {
    const all: Record<string, string> = { "--platform-url": "https://p.example.com", "--system-key": SK, "--edge-name": "e", "--edge-token": "t" };
    for (const missing of Object.keys(all)) {
      const argv = ["--mode", "edge", ...Object.entries(all).filter(([k]) => k !== missing).flat()];
      const e = configError(() => load(argv));
      expect(e.message).toContain(missing);
    }
    // platform mode does not need them
    expect(load(["--mode", "platform"]).mode).toBe("platform");
    // they can come from the environment too
    const c = load(["--mode", "edge"], { OUTPOST_PLATFORM_URL: "https://p.example.com", OUTPOST_SYSTEM_KEY: SK, OUTPOST_EDGE_NAME: "e", OUTPOST_EDGE_TOKEN: "t" });
    expect(c.edgeName).toBe("e");
  });

  test("--edge-token-file gives the token at the precedence of where it is named", () => {
    const tokenFile = join(dir, `token${n++}`);
    writeFileSync(tokenFile, "from-file\n");
    const base = ["--mode", "edge", "--platform-url", "https://p.example.com", "--system-key", SK, "--edge-name", "e"];
    expect(load([...base, "--edge-token-file", tokenFile]).edgeToken).toBe("from-file");
    expect(load(base, { OUTPOST_EDGE_TOKEN_FILE: tokenFile }).edgeToken).toBe("from-file");
    expect(load([...base, "--config", file("toml", `edge-token-file = "${tokenFile}"`)]).edgeToken).toBe("from-file");
    // the environment's token beats a file named in the config file; a file named by a flag beats the environment's
    expect(load([...base, "--config", file("json", JSON.stringify({ edgeTokenFile: tokenFile }))], { OUTPOST_EDGE_TOKEN: "from-env" }).edgeToken).toBe("from-env");
    expect(load([...base, "--edge-token-file", tokenFile], { OUTPOST_EDGE_TOKEN: "from-env" }).edgeToken).toBe("from-file");
    expect(configError(() => load([...base, "--edge-token-file", join(dir, "missing")])).message).toContain("cannot read --edge-token-file");
    expect(configError(() => load([...base, "--edge-token-file", tokenFile, "--edge-token", "x"])).message).toContain("give one");
    const empty = join(dir, `token${n++}`);
    writeFileSync(empty, "\n");
    expect(configError(() => load([...base, "--edge-token-file", empty])).message).toContain("is empty");
  });
});

describe("errors", () => {
  test("unknown flags and stray arguments", () => {
    expect(configError(() => load(["--bogus"])).message).toContain("--bogus");
    expect(configError(() => load(["--bogus=1"])).message).toContain("--bogus");
    configError(() => load(["platform"]));
    configError(() => load(["--http-port", "9000", "extra"]));
    configError(() => load(["---http-port", "1"]));
    configError(() => load(["--"]));
  });

  test("a flag without its value", () => {
    expect(configError(() => load(["--http-port"])).message).toContain("needs a value");
    configError(() => load(["--mode"]));
  });

  test("bad values name the setting", () => {
    const cases: [string[], string][] = [
      [["--http-port", "abc"], "--http-port"],
      [["--http-port", "70000"], "--http-port"],
      [["--http-port", "-1"], "--http-port"],
      [["--mqtt-port", "1.5"], "--mqtt-port"],
      [["--mode", "cloud"], "--mode"],
      [["--log-level", "loud"], "--log-level"],
      [["--db-driver", "sqlite"], "--db-driver"],
      [["--system-key", "NOT-HEX"], "--system-key"],
      [["--platform-url", "not a url"], "--platform-url"],
      [["--admin-email", "nope"], "--admin-email"],
      [["--development-mode=maybe"], "--development-mode"],
      [["--dev-token-ttl", "soon"], "--dev-token-ttl"],
      [["--tls-cert", "/c.pem"], "--tls"],
    ];
    for (const [argv, name] of cases) {
      const e = configError(() => load(argv));
      expect({ argv, message: e.message.includes(name) }).toEqual({ argv, message: true });
    }
  });

  test("an empty value is not a port", () => {
    configError(() => load(["--http-port="]));
  });

  test("bad values from the environment and the config file are ConfigErrors", () => {
    configError(() => load([], { OUTPOST_HTTP_PORT: "eighty" }));
    configError(() => load([], { OUTPOST_DEVELOPMENT_MODE: "sometimes" }));
    configError(() => load(["--config", file("json", JSON.stringify({ httpPort: "x" }))]));
  });

  test("config file problems", () => {
    expect(configError(() => load(["--config", file("json", JSON.stringify({ notASetting: 1 }))])).message).toContain("notASetting");
    configError(() => load(["--config", join(dir, "missing.json")]));
    configError(() => load(["--config", file("json", "{ not json")]));
    configError(() => load(["--config", file("toml", "httpPort = = 1")]));
    configError(() => load(["--config", file("json", "[1,2]")]));
    configError(() => load(["--config", file("json", "null")]));
  });
});

describe("cluster flags", () => {
  test("--redis-url takes redis:// and rediss:// URLs; --node-id a name without spaces", () => {
    expect(load(["--redis-url", "redis://10.0.0.5:6379", "--node-id", "node-a"])).toMatchObject({ redisUrl: "redis://10.0.0.5:6379", nodeId: "node-a" });
    expect(load(["--redis-url", "rediss://user:pw@redis.internal:6380/0"]).redisUrl).toBe("rediss://user:pw@redis.internal:6380/0");
    expect(load([]).nodeId).toBeUndefined(); // hostname:http-port, decided at start
    expect(load([], { OUTPOST_NODE_ID: "from-env", OUTPOST_REDIS_URL: "redis://r:6379" })).toMatchObject({ nodeId: "from-env", redisUrl: "redis://r:6379" });
  });

  test("a Redis URL without its scheme and a node id with spaces or slashes are refused", () => {
    expect(() => load(["--redis-url", "localhost:6379"])).toThrow(/--redis-url: must be a redis:\/\/ or rediss:\/\/ URL/);
    expect(() => load(["--redis-url", "http://localhost:6379"])).toThrow(ConfigError);
    expect(() => load(["--node-id", "node a"])).toThrow(/--node-id/);
    expect(() => load(["--node-id", "a/b"])).toThrow(/--node-id/);
    expect(() => load(["--node-id", "x".repeat(129)])).toThrow(/--node-id/);
  });
});

describe("logs and metrics flags", () => {
  test("defaults: every request logged, /metrics nowhere without a token, no system labels", () => {
    const c = load([]);
    expect([c.accessLog, c.accessLogSample, c.metricsToken, c.metricsPort, c.metricsSystemLabels]).toEqual(["all", 1, undefined, 0, 0]);
    const set = load(["--access-log", "errors", "--access-log-sample", "0.25", "--metrics-port", "9464", "--metrics-system-labels", "20"], { OUTPOST_METRICS_TOKEN: "t".repeat(16) });
    expect([set.accessLog, set.accessLogSample, set.metricsToken, set.metricsPort, set.metricsSystemLabels]).toEqual(["errors", 0.25, "t".repeat(16), 9464, 20]);
  });

  test("bad values name their flag", () => {
    expect(configError(() => load(["--access-log", "some"])).message).toMatch(/--access-log/);
    for (const f of ["0", "1.5", "-0.1", "half"]) expect(configError(() => load(["--access-log-sample", f])).message).toMatch(/--access-log-sample/);
    expect(configError(() => load(["--metrics-token", "short"])).message).toMatch(/--metrics-token.*at least 16/);
    expect(configError(() => load(["--metrics-port", "70000"])).message).toMatch(/--metrics-port/);
    for (const n of ["-1", "1001", "2.5"]) expect(configError(() => load(["--metrics-system-labels", n])).message).toMatch(/--metrics-system-labels/);
  });
});
