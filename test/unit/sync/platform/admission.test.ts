// Hellos are admitted a slice at a time (src/sync/platform/admission.ts): what an edge sends right
// after its hello waits for it (never "say hello first"), a herd's hellos are all welcomed, and a
// link closed while its hello waits is not welcomed. A slice holds the loop about HELLO_TURN_MS:
// a herd's hellos run across turns, in the order they came, and a request (/health) is answered
// between them.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { App } from "../../../../src/app.ts";
import type { Principal } from "../../../../src/auth/principal.ts";
import type { SyncHub } from "../../../../src/sync/platform/hub.ts";
import { HELLO_TURN_MS, HelloAdmission } from "../../../../src/sync/platform/admission.ts";
import type { EdgeSession } from "../../../../src/sync/platform/session.ts";
import { settle, startHubApp } from "../hubApp.ts";

let app: App;
let hub: SyncHub;
let dev: Principal;
let sk: string;

beforeAll(async () => ({ app, hub, dev, sk } = await startHubApp("admission")));
afterAll(() => app.stop());

function link() {
  const got: any[] = [];
  const socket = { send: (text: string) => { got.push(JSON.parse(text)); }, close: () => {} };
  hub.open(socket);
  return { socket, got };
}
const hello = (name: string) => JSON.stringify({ t: "hello", systemKey: sk, edge: name, token: `${name}-token`, cursor: 0, synced: false, pingMs: 600_000 });

describe("hellos admitted a slice at a time", () => {
  test("a ping sent right after the hello is answered once the edge is welcomed", async () => {
    await app.services.edges.create(dev, sk, "eager", { token: "eager-token" });
    const { socket, got } = link();
    const welcomed = hub.message(socket, hello("eager"));
    const ping = hub.message(socket, JSON.stringify({ t: "ping" }));
    await Promise.all([welcomed, ping]);
    expect(got[0]?.t).toBe("welcome");
    expect(got.some((m) => m.t === "pong")).toBe(true);
    expect(got.some((m) => m.t === "error")).toBe(false);
  });

  test("a herd of hellos at once: every edge is welcomed", async () => {
    const names = Array.from({ length: 450 }, (_, i) => `herd-${i}`);
    for (const n of names) await app.services.edges.create(dev, sk, n, { token: `${n}-token` });
    const links = names.map(() => link());
    await Promise.all(names.map((n, i) => hub.message(links[i]!.socket, hello(n))));
    expect(links.filter((l) => l.got[0]?.t === "welcome").length).toBe(names.length);
    await settle(() => names.every((n) => hub.isConnected(sk, n)));
  });

  test("a link closed while its hello waits is not welcomed, and a later hello of its edge is", async () => {
    await app.services.edges.create(dev, sk, "gone", { token: "gone-token" });
    const first = link();
    const waited = hub.message(first.socket, hello("gone"));
    await hub.close(first.socket, 1006);
    await waited;
    expect(first.got).toEqual([]);
    expect(hub.isConnected(sk, "gone")).toBe(false);
    const again = link();
    await hub.message(again.socket, hello("gone"));
    expect(again.got[0]?.t).toBe("welcome");
    expect(hub.isConnected(sk, "gone")).toBe(true);
  });
});

/** A herd of `n` hellos, each holding the loop `ms` after its first await (as a hello's reads,
 *  kept in memory, settle in the same turn); the order they ran in. */
function slowHerd(admission: HelloAdmission, n: number, ms: number) {
  const ran: number[] = [];
  const all = Array.from({ length: n }, (_, i) => admission.admit({} as EdgeSession, async () => {
    await null;
    for (const until = performance.now() + ms; performance.now() < until;) { /* the hello's work */ }
    ran.push(i);
  }));
  return { ran, all: Promise.all(all) };
}

describe("a slice holds the loop a bounded time", () => {
  test("a herd's hellos run across turns, each slice about HELLO_TURN_MS, all in the order they came", async () => {
    const admission = new HelloAdmission();
    const { ran, all } = slowHerd(admission, 300, 1);
    // what a timer sees between two turns: hellos run so far
    const seen: number[] = [];
    const tick = setInterval(() => seen.push(ran.length), 1);
    await all;
    clearInterval(tick);
    expect(ran).toEqual(Array.from({ length: 300 }, (_, i) => i));
    // 300 ms of hellos: the loop came back many times, never after more than a few slices' worth
    expect(admission.slices).toBeGreaterThan(10);
    const steps = seen.slice(1).map((x, i) => x - seen[i]!);
    expect(Math.max(...steps)).toBeLessThan(4 * HELLO_TURN_MS);
  }, 30_000);

  test("/health is answered while a herd is admitted", async () => {
    const admission = new HelloAdmission();
    const { ran, all } = slowHerd(admission, 400, 1);
    const r = await fetch(`http://127.0.0.1:${app.http.port}/health`);
    const atAnswer = ran.length;
    expect(r.status).toBe(200);
    await all;
    // answered after a few slices, not after the whole herd's 400 ms
    expect(atAnswer).toBeLessThan(200);
  }, 30_000);
});
