// The edge's platform link on a gateway, black-box: the outbox held to --outbox-max-mb and
// --outbox-max-age while the platform is out of reach (oldest dropped, logged, counted on /metrics);
// the protocol versions the two sides exchange at hello (an edge speaking one the platform does not
// is refused, and the platform's status says why); HTTPS_PROXY / HTTP_PROXY / NO_PROXY for the link, to an http://
// and an https:// platform (through a proxy written here); each edge's lag and outbox on /metrics.
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import WebSocket, { WebSocketServer } from "ws";
import { Client, type DevSystem, devWithSystem, freePort, hasCommand, isErr, needs, type Outpost, qs, request, runBin, startOutpost, testCertificates, uniq, waitFor, must, metrics } from "./harness.ts";
import { tcpProxy } from "./tcp-proxy.ts";

const PING_MS = 500;
const started: Outpost[] = [];
const closers: (() => Promise<void>)[] = [];
t.teardown(async () => {
  for (const o of started) await o.stop().catch(() => {});
  for (const c of closers) await c().catch(() => {});
});

const platform = await startOutpost({ args: ["--log-level", "info", "--sync-compact-ms", "1000", "--metrics-system-labels", "50"] });
started.push(platform);

/** A collection whose rows flow up (sync_to_platform) and an edge record holding it. */
async function upEdge(sys: DevSystem) {
  const name = uniq("up");
  const id = (await must(sys.dev.post("/admin/collectionmanagement", { name, appID: sys.systemKey }), "collection")).collectionID as string;
  await must(sys.dev.put("/admin/collectionmanagement", { id, addColumn: { name: "label", type: "string" } }), "column");
  const edge = uniq("gw"), token = `${edge}-token`;
  await must(sys.dev.post(`/admin/edges/${sys.systemKey}/${edge}`, { token }), "edge");
  await must(sys.dev.put(`/admin/edges/template/${sys.systemKey}/${edge}`, { add: [{ def_module: "collection", def_name: name, mode: "sync_to_platform" }] }), "template");
  return { name, id, edge, token };
}

async function startEdge(sys: DevSystem, e: { edge: string; token: string }, platformUrl: string, args: string[] = [], env: Record<string, string> = {}) {
  const o = await startOutpost({ env, args: ["--mode", "edge", "--platform-url", platformUrl, "--system-key", sys.systemKey, "--edge-name", e.edge, "--edge-token", e.token,
    "--sync-ping-ms", String(PING_MS), "--log-level", "info", ...args] });
  started.push(o);
  return o;
}

async function edgeDev(o: Outpost, sys: DevSystem): Promise<Client> {
  let c: Client | null = null;
  const ok = await waitFor(async () => {
    const a = await request(o.url, "POST", "/admin/auth", { body: { email: sys.email, password: sys.password } });
    if (a.status === 200) c = new Client(o.url, { "ClearBlade-DevToken": a.body.dev_token });
    return a.status === 200;
  }, 20_000);
  if (!ok) throw new Error("the developer cannot sign in on the edge");
  return c!;
}

const metric = async (o: Outpost, name: string, labels = ""): Promise<number | null> => {
  const text = (await metrics(o)).text;
  const line = text.split("\n").find((l) => l.startsWith(name + (labels ? `{${labels}}` : "")) && (labels || /^[^{]+ /.test(l)));
  return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : null;
};
const connected = async (sys: DevSystem, edge: string) => (await sys.dev.get(`/admin/edges/${sys.systemKey}/${edge}`)).body.isConnected === true;
const platformLabels = (rows: { label: string }[]) => rows.map((r) => r.label);

t.test("the outbox is held to --outbox-max-mb while the platform is out of reach: the oldest go, with a log line and a count", async (t) => {
  const sys = await devWithSystem(platform, "outbox-size");
  const e = await upEdge(sys);
  const proxy = await tcpProxy(platform.httpPort);
  closers.push(() => proxy.close());
  const edge = await startEdge(sys, e, proxy.url, ["--outbox-max-mb", "1"]);
  t.ok(await waitFor(() => connected(sys, e.edge), 20_000), "connected");
  const ed = await edgeDev(edge, sys);
  proxy.cut();
  t.ok(await waitFor(async () => !(await connected(sys, e.edge)), 10_000), "the link is down");
  // 30 rows of 100 KB: about 3 MB in the outbox, three times its bound
  const big = "x".repeat(100_000);
  for (let i = 0; i < 30; i++) await must(ed.post(`/api/v/1/data/${e.id}`, { label: `row-${String(i).padStart(2, "0")}-${big}` }), "write on the edge");
  // a trim that ran while the writes still came dropped part of them; a later one drops the rest
  t.ok(await waitFor(async () => ((await metric(edge, "outpost_sync_outbox_dropped_total")) ?? 0) >= 19, 10_000), "the edge's /metrics counts dropped items");
  const dropped = (await metric(edge, "outpost_sync_outbox_dropped_total"))!;
  t.ok(dropped >= 19 && dropped <= 21, `about 20 of the 30 dropped (${dropped})`);
  t.match(edge.logs(), /outbox over its bounds: the oldest items were dropped[^\n]*--outbox-max-mb \(1 MB\)/, "a log line says why");
  const waiting = (await must(ed.get("/api/v/4/edge/status"), "edge status")).outbox;
  t.equal(waiting, 30 - dropped, `the newest ${waiting} wait`);
  proxy.heal();
  let labels: string[] = [];
  t.ok(await waitFor(async () => {
    labels = platformLabels((await sys.dev.get(`/api/v/1/data/${e.id}?query=${qs({ PAGESIZE: 0, PAGENUM: 0 })}`)).body.DATA ?? []);
    return labels.length === waiting;
  }, 20_000), `the platform gets the ${waiting} newest (${labels.length})`);
  const got = labels.map((l) => Number(l.slice(4, 6))).sort((a, b) => a - b);
  t.same(got, Array.from({ length: waiting }, (_, i) => 30 - waiting + i), "the oldest were the ones dropped");
  await edge.stop();
});

t.test("outbox items older than --outbox-max-age are dropped", async (t) => {
  const sys = await devWithSystem(platform, "outbox-age");
  const e = await upEdge(sys);
  const proxy = await tcpProxy(platform.httpPort);
  closers.push(() => proxy.close());
  const edge = await startEdge(sys, e, proxy.url, ["--outbox-max-age", "2"]);
  t.ok(await waitFor(() => connected(sys, e.edge), 20_000), "connected");
  const ed = await edgeDev(edge, sys);
  proxy.cut();
  t.ok(await waitFor(async () => !(await connected(sys, e.edge)), 10_000), "the link is down");
  await must(ed.post(`/api/v/1/data/${e.id}`, [{ label: "old-1" }, { label: "old-2" }]), "writes on the edge");
  t.equal((await must(ed.get("/api/v/4/edge/status"), "edge status")).outbox, 2, "two items wait");
  t.ok(await waitFor(async () => (await metric(edge, "outpost_sync_outbox_dropped_total")) === 2, 10_000), "dropped once older than 2 s");
  t.match(edge.logs(), /older than --outbox-max-age \(2 s\)/, "the log line says why");
  await must(ed.post(`/api/v/1/data/${e.id}`, { label: "new" }), "a new write");
  proxy.heal();
  t.ok(await waitFor(async () => platformLabels((await sys.dev.get(`/api/v/1/data/${e.id}`)).body.DATA ?? []).join() === "new", 20_000), "the platform gets only the new write");
  await edge.stop();
});

t.test("the sync route without a WebSocket upgrade: a 400 in the API's error envelope", async (t) => {
  const r = await request(platform.url, "GET", "/api/v/4/sync");
  isErr(t, r, 400, "a plain GET");
  t.match(r.text, /WebSocket upgrade/, "saying it takes an upgrade");
});

t.test("an edge speaking a sync protocol the platform does not is refused, and the platform's status says so", async (t) => {
  const sys = await devWithSystem(platform, "protocol");
  const e = await upEdge(sys);
  const ws = new WebSocket(platform.url.replace("http:", "ws:") + "/api/v/4/sync");
  const got: any[] = [];
  const closed = new Promise<number>((r) => ws.on("close", (code) => r(code)));
  ws.on("message", (d) => got.push(JSON.parse(String(d))));
  await new Promise((r) => ws.once("open", r));
  ws.send(JSON.stringify({ t: "hello", systemKey: sys.systemKey, edge: e.edge, token: e.token, cursor: 0, version: "99.0.0", protocol: 99 }));
  t.equal(await closed, 4000, "the link is closed");
  t.equal(got[0]?.t, "error", "with an error message");
  t.match(got[0]?.message, /the edge speaks sync protocol 99; this platform speaks/, `naming both versions: ${got[0]?.message}`);
  t.notOk(got.some((m) => m.t === "welcome"), "no welcome");
  const st = await must(sys.dev.get(`/admin/${sys.systemKey}/sync/edge/status/${e.edge}`), "status");
  const p = st.find((a: any) => a.asset_type === "protocol");
  t.equal(p?.status, "failed", "the status has a failed protocol entry");
  t.match(p?.last_error, /sync protocol 99/, "saying why");
  t.equal((await sys.dev.get(`/admin/edges/${sys.systemKey}/${e.edge}`)).body.isConnected, false, "the edge is not connected");

  // the real edge speaks a protocol the platform does: welcomed, and the entry goes
  const edge = await startEdge(sys, e, platform.url);
  t.ok(await waitFor(() => connected(sys, e.edge), 20_000), "a current edge connects");
  t.notOk((await must(sys.dev.get(`/admin/${sys.systemKey}/sync/edge/status/${e.edge}`), "status")).some((a: any) => a.asset_type === "protocol"), "no protocol entry once it is");
  await edge.stop();

  // an edge from before protocol versions were exchanged (no field) is served as before
  const old = new WebSocket(platform.url.replace("http:", "ws:") + "/api/v/4/sync");
  const first = new Promise<any>((r) => old.once("message", (d) => r(JSON.parse(String(d)))));
  await new Promise((r) => old.once("open", r));
  old.send(JSON.stringify({ t: "hello", systemKey: sys.systemKey, edge: e.edge, token: e.token, cursor: 0 }));
  const w = await first;
  t.equal(w.t, "welcome", "an older edge is welcomed");
  t.equal(w.protocol, 2, "the welcome says which protocol the platform speaks");
  old.close();
});

/** A platform written here: answers each hello with `answer(hello)`'s messages (closing the link
 *  with `close` when given), and notes the hellos and the codes the edge closed the link with. */
async function fakePlatform(answer: (hello: any) => { messages: unknown[]; close?: number }) {
  const hellos: any[] = [], closes: number[] = [];
  const srv = new WebSocketServer({ host: "127.0.0.1", port: 0, path: "/api/v/4/sync" });
  await new Promise((r) => srv.once("listening", r));
  srv.on("connection", (ws) => {
    ws.on("close", (code) => closes.push(code));
    ws.on("message", (d) => {
      const m = JSON.parse(String(d));
      if (m.t !== "hello") return;
      hellos.push(m);
      const a = answer(m);
      for (const x of a.messages) ws.send(JSON.stringify(x));
      if (a.close) ws.close(a.close);
    });
  });
  return { url: `http://127.0.0.1:${(srv.address() as net.AddressInfo).port}`, hellos, closes, close: () => new Promise<void>((r) => { for (const c of srv.clients) c.terminate(); srv.close(() => r()); }) };
}

const edgeStatus = async (o: Outpost, token: string) => must(request(o.url, "GET", "/api/v/4/edge/status", { headers: { "ClearBlade-DevToken": token } }), "edge status");
const edgeStatusCli = (o: Outpost, sys: DevSystem, e: { edge: string; token: string }, platformUrl: string, more: string[] = []) =>
  runBin(["status", ...more, "--mode", "edge", "--platform-url", platformUrl, "--system-key", sys.systemKey, "--edge-name", e.edge, "--edge-token", e.token, "--http-port", String(o.httpPort)], { timeoutMs: 30_000 });

t.test("an edge its platform refuses for its sync protocol shows the refusal and why (local status, outpost status)", async (t) => {
  const sys = await devWithSystem(platform, "refused");
  const e = { edge: uniq("gw"), token: uniq("tok") };
  // a platform from a later release that no longer serves this edge's protocol answers as ours does
  const fake = await fakePlatform((h) => ({ messages: [{ t: "error", message: `the edge speaks sync protocol ${h.protocol}; this platform speaks 98 to 99` }], close: 4000 }));
  closers.push(fake.close);
  const edge = await startEdge(sys, e, fake.url);
  t.ok(await waitFor(async () => (await edgeStatus(edge, e.token)).refused !== "", 20_000), "the edge's status shows a refusal");
  const st = await edgeStatus(edge, e.token);
  t.equal(st.connected, false, "not connected");
  t.match(st.refused, /the edge speaks sync protocol \d+; this platform speaks 98 to 99/, `saying why: ${st.refused}`);
  t.equal(fake.hellos[0]?.protocol, 2, "the hello said which protocol the edge speaks");
  const r = await edgeStatusCli(edge, sys, e, fake.url);
  t.equal(r.code, 3, `outpost status on the edge: exit 3 (${r.stderr})`);
  t.match(r.stdout, /: REFUSED \(the edge speaks sync protocol \d+; this platform speaks 98 to 99\), last contact/, `the refusal shown: ${r.stdout}`);
  const json = await edgeStatusCli(edge, sys, e, fake.url, ["--json"]);
  t.equal(JSON.parse(json.stdout).refused, st.refused, "--json has it too");
  t.equal(fake.hellos.length, 1, "the edge does not knock again at once");
  await edge.stop();
});

t.test("an edge welcomed by a platform speaking a newer incompatible protocol refuses it and shows why", async (t) => {
  const sys = await devWithSystem(platform, "newer");
  const e = { edge: uniq("gw"), token: uniq("tok") };
  const fake = await fakePlatform(() => ({ messages: [{ t: "welcome", system: {}, owner: {}, template: [], snapshot: true, seq: 0, incarnation: "x", hlc: "", protocol: 99 }] }));
  closers.push(fake.close);
  const edge = await startEdge(sys, e, fake.url);
  t.ok(await waitFor(() => fake.closes.length > 0, 20_000), "the edge closes the link");
  t.equal(fake.closes[0], 4004, "saying protocol version");
  t.ok(await waitFor(async () => (await edgeStatus(edge, e.token)).refused !== "", 10_000), "the edge's status shows the refusal");
  const st = await edgeStatus(edge, e.token);
  t.equal(st.connected, false, "not connected");
  t.match(st.refused, /the platform speaks sync protocol 99; this edge speaks/, `saying why: ${st.refused}`);
  t.equal(st.snapshot_done, false, "nothing of the welcome was taken");
  t.match(edge.logs(), /the platform's sync protocol is not one this edge speaks/, "logged");
  const r = await edgeStatusCli(edge, sys, e, fake.url);
  t.equal(r.code, 3, "outpost status on the edge: exit 3");
  t.match(r.stdout, /: REFUSED \(the platform speaks sync protocol 99; this edge speaks [^)]+\)/, `the refusal shown: ${r.stdout}`);
  await edge.stop();

  // against a platform it can talk to the refusal goes
  const ok = await upEdge(sys);
  const real = await startEdge(sys, ok, platform.url);
  t.ok(await waitFor(async () => (await edgeStatus(real, ok.token)).connected === true, 20_000), "a compatible platform: connected");
  t.equal((await edgeStatus(real, ok.token)).refused, "", "no refusal");
  await real.stop();
});

/** An HTTP proxy: tunnels to the host and port a CONNECT asks for, passes a request in absolute
 *  form (an http:// target) on, and notes each target asked for. */
async function connectProxy() {
  const asked: string[] = [];
  const srv = net.createServer((c) => {
    let head = Buffer.alloc(0);
    const onData = (d: Buffer) => {
      head = Buffer.concat([head, d]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      c.off("data", onData);
      const text = head.toString("latin1");
      const connect = /^CONNECT ([^\s:]+):(\d+) HTTP\/1\.[01]\r\n/.exec(text);
      const plain = /^([A-Z]+) http:\/\/([^\s:/]+):(\d+)(\/\S*) (HTTP\/1\.[01])\r\n/.exec(text);
      if (!connect && !plain) { c.end("HTTP/1.1 405 Method Not Allowed\r\n\r\n"); return; }
      const [host, port] = connect ? [connect[1]!, connect[2]!] : [plain![2]!, plain![3]!];
      asked.push(`${host}:${port}`);
      const up = net.connect(Number(port), host, () => {
        if (connect) { c.write("HTTP/1.1 200 Connection Established\r\n\r\n"); up.write(head.subarray(end + 4)); }
        else up.write(Buffer.concat([Buffer.from(`${plain![1]} ${plain![4]} ${plain![5]}\r\n`, "latin1"), head.subarray(plain![0].length)]));
        c.pipe(up); up.pipe(c);
      });
      const close = () => { c.destroy(); up.destroy(); };
      up.on("error", close); c.on("error", close); up.on("close", close); c.on("close", close);
    };
    c.on("data", onData);
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
  return { url: `http://127.0.0.1:${(srv.address() as net.AddressInfo).port}`, asked, close: () => new Promise<void>((r) => srv.close(() => r())) };
}

t.test("the platform link goes through HTTP_PROXY / HTTPS_PROXY unless NO_PROXY names the platform", async (t) => {
  const sys = await devWithSystem(platform, "proxy");
  const proxy = await connectProxy();
  closers.push(proxy.close);
  const target = `127.0.0.1:${platform.httpPort}`;

  const a = await upEdge(sys);
  const viaProxy = await startEdge(sys, a, platform.url, [], { HTTP_PROXY: proxy.url });
  t.ok(await waitFor(() => connected(sys, a.edge), 20_000), "connected through the proxy");
  t.ok(proxy.asked.includes(target), `the proxy was asked for the platform (${proxy.asked.join(", ")})`);
  // the developer sign-in the edge checks with the platform goes the same way
  const before = proxy.asked.length;
  await edgeDev(viaProxy, sys);
  t.ok(proxy.asked.length > before, "the edge's calls to the platform's API go through it too");
  await viaProxy.stop();

  const b = await upEdge(sys);
  const asked = proxy.asked.length;
  const direct = await startEdge(sys, b, platform.url, [], { HTTP_PROXY: proxy.url, NO_PROXY: "localhost,127.0.0.1" });
  t.ok(await waitFor(() => connected(sys, b.edge), 20_000), "connected");
  t.equal(proxy.asked.length, asked, "NO_PROXY naming the platform's host: not through the proxy");
  await direct.stop();

  const c = await upEdge(sys);
  const broken = await startEdge(sys, c, platform.url, [], { HTTP_PROXY: "http://127.0.0.1:1" });
  t.notOk(await waitFor(() => connected(sys, c.edge), 3_000), "a proxy out of reach: no link (it is not bypassed)");
  t.equal((await request(broken.url, "GET", "/health")).status, 200, "the edge runs meanwhile");
  await broken.stop();
});

t.test("an https:// platform through HTTPS_PROXY (a CONNECT tunnel, the platform's certificate checked end to end)", await needs("openssl", hasCommand("openssl")), async (t) => {
  // a CA and a certificate it signed for 127.0.0.1
  const dir = mkdtempSync(join(tmpdir(), "outpost-proxy-tls-"));
  closers.push(async () => rmSync(dir, { recursive: true, force: true }));
  const certs = testCertificates(dir, "Outpost proxy test CA");
  const [httpsPort, wss, mqtts] = await Promise.all([freePort(), freePort(), freePort()]);
  const secure = await startOutpost({ args: ["--tls-cert", certs.cert, "--tls-key", certs.key, "--https-port", String(httpsPort), "--mqtt-wss-port", String(wss), "--mqtt-tls-port", String(mqtts)] });
  started.push(secure);
  const sys = await devWithSystem(secure, "proxy-tls");
  const e = await upEdge(sys);
  const proxy = await connectProxy();
  closers.push(proxy.close);
  const edge = await startEdge(sys, e, `https://127.0.0.1:${httpsPort}`, ["--platform-ca", certs.ca], { HTTPS_PROXY: proxy.url, HTTP_PROXY: "http://127.0.0.1:1" });
  t.ok(await waitFor(() => connected(sys, e.edge), 20_000), "connected over wss:// through the proxy");
  t.same([...new Set(proxy.asked)], [`127.0.0.1:${httpsPort}`], "the proxy tunnelled to the platform's HTTPS port (HTTP_PROXY, out of reach, is not used for https)");
  t.ok((await edgeDev(edge, sys)).headers["ClearBlade-DevToken"], "a developer signs in on the edge, the edge asking the platform through the tunnel");
  await edge.stop();
});

t.test("the platform's /metrics shows each connected edge's lag and outbox", async (t) => {
  const sys = await devWithSystem(platform, "metrics");
  const e = await upEdge(sys);
  const edge = await startEdge(sys, e, platform.url);
  t.ok(await waitFor(() => connected(sys, e.edge), 20_000), "connected");
  const labels = `system_key="${sys.systemKey}",edge="${e.edge}"`;
  t.ok(await waitFor(async () => (await metric(platform, "outpost_sync_edge_lag", labels)) === 0, 10_000), "the edge's lag: 0");
  t.ok(await waitFor(async () => (await metric(platform, "outpost_sync_edge_outbox_items", labels)) === 0, 10_000), "its outbox: 0 (its pings say)");
  await edge.stop();
  t.ok(await waitFor(async () => (await metric(platform, "outpost_sync_edge_lag", labels)) === null, 10_000), "gone once it disconnected");
});
