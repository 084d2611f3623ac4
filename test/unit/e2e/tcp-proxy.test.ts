// The black-box suites' TCP proxy (test/e2e/tcp-proxy.ts), run on Node as those suites run it:
// a cut resets the edge's connection, and leaves the process free to end.
import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { bundleE2E } from "../../../scripts/bundle-e2e.ts";
import { onNode, ROOT, scratchDir } from "./on-node.ts";

const dir = scratchDir("proxy-");

/** Runs a script importing the proxy on Node (no preload: a process that cannot end shows). */
async function withProxy(name: string, body: string) {
  writeFileSync(join(dir, `${name}.ts`), `import net from "node:net";\nimport { reset, tcpProxy } from ${JSON.stringify(join(ROOT, "test/e2e/tcp-proxy.ts"))};\nvoid reset; void tcpProxy;\n${body}`);
  const built = await bundleE2E([join(dir, `${name}.ts`)], join(dir, "out"), dir);
  expect(built.ok).toBe(true);
  return onNode([join(dir, "out", `${name}.mjs`)]);
}

test("a socket whose shutdown is under way is closed, and the process ends", async () => {
  // resetAndDestroy() there answers EINVAL and Node never closes the handle: the process spun
  // at 100% CPU after its 'exit' event (a black-box file that passed, then hit tap's timeout)
  const r = await withProxy("ended", `
const server = net.createServer((s) => { s.on("error", (e) => process.stdout.write("error " + e.code + "\\n")); s.end(); reset(s); server.close(); });
await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
const c = net.connect((server.address() as net.AddressInfo).port, "127.0.0.1");
c.on("error", () => {});
c.on("close", () => process.stdout.write("closed\\n"));
process.on("exit", () => process.stdout.write("exit event\\n"));
`);
  expect(r.out).toContain("closed");
  expect(r.out).not.toContain("error EINVAL");
  expect(r.ended).toBe(true);
  expect(r.code).toBe(0);
}, 30_000);

test("a cut resets the connections through the proxy and refuses new ones until healed", async () => {
  const r = await withProxy("cut", `
const platform = net.createServer((s) => { s.on("error", () => {}); s.on("data", (d) => s.write(d)); });
await new Promise<void>((r) => platform.listen(0, "127.0.0.1", () => r()));
const proxy = await tcpProxy((platform.address() as net.AddressInfo).port);
const connect = () => new Promise<net.Socket>((res) => { const c = net.connect(proxy.port, "127.0.0.1"); c.on("error", (e) => process.stdout.write("edge error " + (e as NodeJS.ErrnoException).code + "\\n")); c.on("connect", () => res(c)); });
const edge = await connect();
edge.write("ping");
await new Promise((r) => edge.once("data", (d) => { process.stdout.write("echo " + d + "\\n"); r(0); }));
const closed = new Promise((r) => edge.on("close", r));
proxy.cut();
await closed;
const refused = await new Promise((res) => { const c = net.connect(proxy.port, "127.0.0.1"); c.on("error", (e) => res((e as NodeJS.ErrnoException).code)); c.on("close", () => res("closed")); });
process.stdout.write("while cut: " + refused + "\\n");
proxy.heal();
const again = await connect();
again.write("pong");
await new Promise((r) => again.once("data", (d) => { process.stdout.write("echo " + d + "\\n"); r(0); }));
again.destroy();
await proxy.close();
platform.close();
`);
  expect(r.out).toContain("echo ping");
  expect(r.out).toContain("edge error ECONNRESET");
  expect(r.out).toMatch(/while cut: (ECONNRESET|closed)/);
  expect(r.out).toContain("echo pong");
  expect(r.ended).toBe(true);
  expect(r.code).toBe(0);
}, 30_000);
