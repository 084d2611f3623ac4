// HTTPS, black-box: with --tls-cert/--tls-key the API answers on --https-port (plain HTTP too,
// unless --http-port 0), WebSocket MQTT works over TLS, an edge reaches an https:// platform with
// --platform-ca (sync and developer sign-in through the platform), and the failure paths: an
// untrusted certificate, an edge without the CA, a missing CA or key file, a bad --cors-origins;
// SIGHUP gives every TLS port a renewed certificate (a bad one is refused).
// Certificates are made here with openssl (a test CA and a server certificate for 127.0.0.1).
import { X509Certificate } from "node:crypto";
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import mqtt from "mqtt";
import t from "tap";
import { devWithSystem, freePort, hasCommand, needs, ok200, request, runBin, startOutpost, testCertificates, uniq, waitFor } from "./harness.ts";

const skip = await needs("openssl", hasCommand("openssl"));
const dir = mkdtempSync(join(tmpdir(), "outpost-tls-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** A CA, a certificate it signed for 127.0.0.1 and localhost, and another CA that signed nothing
 *  here (trusting it is trusting the wrong one). */
function makeCerts() {
  const c = testCertificates(dir);
  return { ca: c.ca, cert: c.cert, key: c.key, other: c.anotherCa("Some other CA") };
}
const certs = skip.skip ? { ca: "", cert: "", key: "", other: "" } : makeCerts();
const caPem = () => readFileSync(certs.ca, "utf8");

interface Res { status: number; headers: Record<string, unknown>; body: any }
function httpsGet(port: number, path: string, opts: { ca?: string; headers?: Record<string, string>; method?: string; body?: unknown } = {}): Promise<Res> {
  const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
  return new Promise((res, rej) => {
    const req = https.request({ host: "127.0.0.1", port, path, method: opts.method ?? "GET", ca: opts.ca, headers: { ...opts.headers, ...(payload ? { "content-length": String(Buffer.byteLength(payload)) } : {}) }, agent: false }, (r) => {
      const chunks: Buffer[] = [];
      r.on("data", (c) => chunks.push(c));
      r.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let body: any = text;
        try { body = JSON.parse(text); } catch { /* not JSON */ }
        res({ status: r.statusCode ?? 0, headers: r.headers, body });
      });
    });
    req.on("error", rej);
    if (payload) req.write(payload);
    req.end();
  });
}

const tlsArgs = () => ["--tls-cert", certs.cert, "--tls-key", certs.key];
async function tlsPlatform(extra: string[] = [], opts: { waitForHealth?: boolean } = {}) {
  const [httpsPort, wss, mqtts] = await Promise.all([freePort(), freePort(), freePort()]);
  const o = await startOutpost({ args: [...tlsArgs(), "--https-port", String(httpsPort), "--mqtt-wss-port", String(wss), "--mqtt-tls-port", String(mqtts), ...extra], waitForHealth: opts.waitForHealth });
  t.teardown(() => o.stop());
  return { o, httpsPort, wss, mqtts };
}

t.test("the API over HTTPS beside plain HTTP", skip, async (t) => {
  const { o, httpsPort } = await tlsPlatform();
  const r = await httpsGet(httpsPort, "/health", { ca: caPem() });
  t.equal(r.status, 200, "HTTPS /health");
  t.equal((await request(o.url, "GET", "/health")).status, 200, "plain HTTP stays");
  const s = await devWithSystem(o, "tls");
  const info = await httpsGet(httpsPort, "/admin/userinfo", { ca: caPem(), headers: { "ClearBlade-DevToken": s.devToken } });
  t.equal(info.status, 200, "a token made over HTTP works over HTTPS");
  t.equal(info.body.email, s.email);
  const pre = await httpsGet(httpsPort, "/admin/userinfo", { ca: caPem(), method: "OPTIONS", headers: { origin: "https://app.example.com", "access-control-request-method": "GET", "access-control-request-headers": "clearblade-devtoken" } });
  t.equal(pre.status, 204, "a CORS preflight over HTTPS");
  t.equal(pre.headers["access-control-allow-origin"], "*");
  const bad = await httpsGet(httpsPort, "/admin/userinfo", { ca: caPem(), headers: { "ClearBlade-DevToken": "nope", origin: "https://app.example.com" } });
  t.equal(bad.status, 400, "an error over HTTPS");
  t.equal(bad.headers["access-control-allow-origin"], "*", "carries the CORS header too");
  await t.rejects(httpsGet(httpsPort, "/health"), "a client that does not trust the test CA refuses the certificate");
  await t.rejects(httpsGet(httpsPort, "/health", { ca: readFileSync(certs.other, "utf8") }), "and so does one trusting another CA");
  const plain = await request(`http://127.0.0.1:${httpsPort}`, "GET", "/health").then((x) => x.status, () => 0);
  t.not(plain, 200, "plain HTTP on the HTTPS port is not served");
});

t.test("--http-port 0 with TLS: HTTPS only", skip, async (t) => {
  const { o, httpsPort } = await tlsPlatform(["--http-port", "0"], { waitForHealth: false });
  t.ok(await waitFor(async () => (await httpsGet(httpsPort, "/health", { ca: caPem() })).status === 200), "HTTPS answers");
  await t.rejects(request(o.url, "GET", "/health"), "nothing on the plain HTTP port");
});

t.test("MQTT over secure WebSocket and TLS", skip, async (t) => {
  const { o, wss, mqtts } = await tlsPlatform();
  const s = await devWithSystem(o, "tls-mqtt");
  for (const [what, url] of [["wss", `wss://127.0.0.1:${wss}/mqtt`], ["mqtts", `mqtts://127.0.0.1:${mqtts}`]] as const) {
    const opts = { ca: caPem(), username: s.devToken, password: s.systemKey, protocolVersion: 4 as const, reconnectPeriod: 0, connectTimeout: 10_000 };
    const sub = await mqtt.connectAsync(url, { ...opts, clientId: uniq("sub") });
    const pub = await mqtt.connectAsync(url, { ...opts, clientId: uniq("pub") });
    const topic = `tls/${what}`;
    const got = new Promise<string>((res) => sub.on("message", (tp, p) => { if (tp === topic) res(p.toString()); }));
    await sub.subscribeAsync(topic, { qos: 1 });
    await pub.publishAsync(topic, `over ${what}`, { qos: 1 });
    t.equal(await got, `over ${what}`, `a message over ${what}`);
    await sub.endAsync();
    await pub.endAsync();
    await t.rejects(mqtt.connectAsync(url, { ...opts, ca: undefined, clientId: uniq("x") }), `${what}: a client without the CA refuses the certificate`);
  }
  t.equal((await request(o.url, "GET", "/health")).status, 200, "still up");
});

t.test("an edge syncs with an https:// platform through --platform-ca; without it, it cannot", skip, async (t) => {
  const { o, httpsPort } = await tlsPlatform();
  const s = await devWithSystem(o, "tls-edge");
  const SK = s.systemKey;
  const platformUrl = `https://127.0.0.1:${httpsPort}`;
  const mkEdge = async (name: string) => {
    const e = await s.dev.post(`/admin/edges/${SK}/${name}`, {});
    ok200(t, e, `edge ${name}`);
    ok200(t, await s.dev.put(`/admin/edges/template/${SK}/${name}`, { add: [{ def_module: "service", def_name: "*", mode: "sync_to_edge" }] }), "template");
    return e.body.token as string;
  };
  ok200(t, await s.dev.post(`/admin/code/v/1/${SK}/calc`, { code: "function calc(req, resp) { resp.success(7); }", parameters: [] }), "a service");
  const token = await mkEdge("secure");
  const edge = await startOutpost({ args: ["--mode", "edge", "--platform-url", platformUrl, "--platform-ca", certs.ca, "--system-key", SK, "--edge-name", "secure", "--edge-token", token] });
  t.teardown(() => edge.stop());
  const record = async (name: string) => (await s.dev.get(`/admin/edges/${SK}/${name}`)).body;
  t.ok(await waitFor(async () => (await record("secure")).isConnected === true), "connected over wss://");
  t.ok(await waitFor(async () => ((await s.dev.get(`/admin/${SK}/sync/edge/status/secure`)).body as any[]).some((a) => a.asset_name === "calc" && a.status === "synced")), "the service synced");
  const auth = await request(edge.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
  ok200(t, auth, "a developer signs in on the edge (the edge asks the platform over HTTPS)");
  const wrong = await request(edge.url, "POST", "/admin/auth", { body: { email: s.email, password: "not it" } });
  t.equal(wrong.status, 401, "a wrong password is refused by the platform");

  // the same edge without the CA, or trusting another CA: never connected
  for (const [name, ca] of [["noca", undefined], ["otherca", certs.other]] as const) {
    const tok = await mkEdge(name);
    const e = await startOutpost({ args: ["--mode", "edge", "--platform-url", platformUrl, ...(ca ? ["--platform-ca", ca] : []), "--system-key", SK, "--edge-name", name, "--edge-token", tok] });
    t.teardown(() => e.stop());
    await new Promise((r) => setTimeout(r, 2500));
    t.equal((await record(name)).isConnected, false, `${name}: the platform's certificate is refused, the edge never connects`);
    t.equal((await request(e.url, "GET", "/health")).status, 200, `${name}: the edge keeps serving locally`);
  }
});

t.test("SIGHUP reloads the TLS certificate: new connections on every TLS port get it, open ones stay; a bad one is refused and the running one kept", skip, async (t) => {
  // the files the instance reads, replaced between reloads as a renewal would
  const live = mkdtempSync(join(dir, "live-"));
  const certFile = join(live, "cert.pem"), keyFile = join(live, "key.pem");
  copyFileSync(certs.cert, certFile);
  copyFileSync(certs.key, keyFile);
  const [httpsPort, wss, mqtts] = await Promise.all([freePort(), freePort(), freePort()]);
  const o = await startOutpost({ args: ["--tls-cert", certFile, "--tls-key", keyFile, "--https-port", String(httpsPort), "--mqtt-wss-port", String(wss), "--mqtt-tls-port", String(mqtts)], logLevel: "info" });
  t.teardown(() => o.stop());
  const ports = { https: httpsPort, "mqtt-tls": mqtts, "mqtt-wss": wss };
  const served = async () => Object.fromEntries(await Promise.all(Object.entries(ports).map(async ([k, port]) => [k, await fingerprintAt(port)])));
  const first = new X509Certificate(readFileSync(certs.cert)).fingerprint256;
  t.same(await served(), { https: first, "mqtt-tls": first, "mqtt-wss": first }, "the first certificate on every TLS port");

  // clients connected before the reload
  const s = await devWithSystem(o, "tls-reload");
  const opts = { ca: caPem(), username: s.devToken, password: s.systemKey, protocolVersion: 4 as const, reconnectPeriod: 0, connectTimeout: 10_000 };
  const before = await Promise.all([`mqtts://127.0.0.1:${mqtts}`, `wss://127.0.0.1:${wss}/mqtt`].map((url) => mqtt.connectAsync(url, { ...opts, clientId: uniq("before") })));
  t.teardown(() => { for (const c of before) c.end(true); });

  // a renewed certificate: another key, signed by another CA
  const next = testCertificates(mkdtempSync(join(dir, "next-")), "Renewal CA");
  copyFileSync(next.cert, certFile);
  copyFileSync(next.key, keyFile);
  o.proc.kill("SIGHUP");
  t.ok(await waitFor(() => /TLS certificate reloaded/.test(o.logs()), 10_000), "the reload is logged");
  const renewed = new X509Certificate(readFileSync(next.cert)).fingerprint256;
  t.same(await served(), { https: renewed, "mqtt-tls": renewed, "mqtt-wss": renewed }, "new connections get the new certificate on every TLS port");
  t.equal((await httpsGet(httpsPort, "/health", { ca: readFileSync(next.ca, "utf8") })).status, 200, "HTTPS serves with it");
  for (const [i, c] of before.entries()) {
    const topic = `reload/${i}`;
    const got = new Promise<string>((res) => c.on("message", (tp, p) => { if (tp === topic) res(p.toString()); }));
    await c.subscribeAsync(topic, { qos: 1 });
    await c.publishAsync(topic, "still here", { qos: 1 });
    t.equal(await got, "still here", `a client connected before the reload is still served (${i ? "wss" : "mqtts"})`);
  }

  // a key that is not the certificate's: refused, the running certificate kept
  copyFileSync(certs.key, keyFile);
  o.proc.kill("SIGHUP");
  t.ok(await waitFor(() => /TLS certificate could not be loaded; keeping the running one/.test(o.logs()), 10_000), "a bad pair is reported");
  t.same(await served(), { https: renewed, "mqtt-tls": renewed, "mqtt-wss": renewed }, "and the running certificate kept");
  t.equal(o.proc.exitCode, null, "the process runs on");
});

/** The SHA-256 fingerprint of the certificate a TLS port presents. */
function fingerprintAt(port: number): Promise<string> {
  return new Promise((res, rej) => {
    const sock = tlsConnect({ host: "127.0.0.1", port, rejectUnauthorized: false }, () => {
      res(new X509Certificate(sock.getPeerCertificate().raw).fingerprint256);
      sock.end();
    });
    sock.on("error", rej);
  });
}

t.test("bad TLS settings stop the start with a reason", skip, async (t) => {
  const ports = async () => ["--http-port", String(await freePort()), "--https-port", String(await freePort()), "--mqtt-port", String(await freePort()), "--mqtt-ws-port", String(await freePort()),
    "--mqtt-tls-port", String(await freePort()), "--mqtt-wss-port", String(await freePort()), "--data-dir", mkdtempSync(join(dir, "d-")), "--log-level", "warn"];
  const missing = await runBin([...(await ports()), "--tls-cert", join(dir, "nope.pem"), "--tls-key", certs.key]);
  t.equal(missing.code, 1, "a missing certificate file: exit 1");
  t.match(missing.stderr, /could not start: .*nope\.pem/, "naming the file");
  const ca = await runBin([...(await ports()), "--mode", "edge", "--platform-url", "https://127.0.0.1:1", "--platform-ca", join(dir, "none.pem"), "--system-key", "abcdefabcdefabcdefabcdef", "--edge-name", "e", "--edge-token", "t"]);
  t.equal(ca.code, 1, "a missing --platform-ca: exit 1");
  t.match(ca.stderr, /--platform-ca .*none\.pem/, "naming the flag and the file");
  for (const bad of ["app.example.com", "https://app.example.com/path", "ftp://x"]) {
    const r = await runBin(["--cors-origins", bad]);
    t.equal(r.code, 2, `--cors-origins ${bad}: exit 2`);
    t.match(r.stderr, /--cors-origins: .*not an origin/);
  }
  const port = await runBin(["--https-port", "70000"]);
  t.equal(port.code, 2, "--https-port out of range: exit 2");
  const same = await runBin([...tlsArgs(), "--http-port", "9100", "--https-port", "9100"]);
  t.equal(same.code, 2, "--https-port equal to --http-port: exit 2");
  t.match(same.stderr, /--https-port: must differ from --http-port/);
});

t.test("an edge serving HTTPS only: its console files and `outpost status` on it over HTTPS", skip, async (t) => {
  const { o } = await tlsPlatform();
  const s = await devWithSystem(o, "tls-only-edge");
  const e = await s.dev.post(`/admin/edges/${s.systemKey}/tlsonly`, {});
  ok200(t, e, "edge record");
  const httpsPort = await freePort();
  const args = ["--mode", "edge", "--platform-url", o.url, "--system-key", s.systemKey, "--edge-name", "tlsonly", "--edge-token", e.body.token,
    ...tlsArgs(), "--https-port", String(httpsPort), "--http-port", "0"];
  const edge = await startOutpost({ args, waitForHealth: false });
  t.teardown(() => edge.stop());
  t.ok(await waitFor(async () => (await httpsGet(httpsPort, "/health", { ca: caPem() })).status === 200), "the edge answers over HTTPS");
  const page = await httpsGet(httpsPort, "/console", { ca: caPem() });
  t.equal(page.status, 200, "the console over HTTPS");
  t.ok(await waitFor(async () => (await s.dev.get(`/admin/edges/${s.systemKey}/tlsonly`)).body?.isConnected === true), "connected to its platform");
  const r = await runBin(["status", ...args], { timeoutMs: 30_000 });
  t.equal(r.code, 0, `outpost status on the edge over its own HTTPS listener: exit 0 (${r.stderr})`);
  t.match(r.stdout, /^platform http:\/\/127\.0\.0\.1:\d+: connected/m, "its link");
  // told another certificate than the one the listener presents: the token is not sent
  const pinned = await runBin(["status", ...args.map((x) => (x === certs.cert ? certs.other : x))], { timeoutMs: 30_000 });
  t.equal(pinned.code, 4, "a listener presenting another certificate: exit 4");
  t.match(pinned.stderr, /does not present the certificate of --tls-cert/, "says why");
});
