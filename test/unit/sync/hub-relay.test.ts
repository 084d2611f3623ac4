// The platform's relay to edges in-process, with edges played by sockets: a message goes to the
// edges its suffix names, topic whole, never back to the edge it came from; one for an edge that
// is not connected, or whose link is far behind, is dropped and counted.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { App } from "../../../src/app.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import type { SyncHub } from "../../../src/sync/platform/hub.ts";
import { startHubApp } from "./hubApp.ts";

let app: App;
let hub: SyncHub;
let dev: Principal;
let sk: string;

beforeAll(async () => ({ app, hub, dev, sk } = await startHubApp("relay")));
afterAll(() => app.stop());

/** An edge played by a socket that keeps the relayed messages it gets; `buffered`: what its link
 *  says waits to be written. */
class FakeEdge {
  relayed: { topic: string; payload: string; qos: number }[] = [];
  buffered = 0;
  constructor(readonly name: string) {}
  readonly socket = {
    send: (text: string) => {
      const m = JSON.parse(text);
      if (m.t === "relay") this.relayed.push({ topic: m.topic, payload: Buffer.from(m.payload, "base64").toString(), qos: m.qos });
      if (m.t === "batch") void hub.message(this.socket, JSON.stringify({ t: "ack", upTo: m.upTo, snapshot: m.snapshot, results: [] }));
      if (m.t === "snapshot_end") void hub.message(this.socket, JSON.stringify({ t: "ack", upTo: m.seq, snapshot: true, results: [] }));
    },
    close: () => {},
    buffered: () => this.buffered,
  };
  static async connect(name: string) {
    await app.services.edges.create(dev, sk, name, { token: `${name}-token` });
    const e = new FakeEdge(name);
    hub.open(e.socket);
    await hub.message(e.socket, JSON.stringify({ t: "hello", systemKey: sk, edge: name, token: `${name}-token`, cursor: 0, pingMs: 600_000 }));
    return e;
  }
}

describe("relay to edges", () => {
  test("by the suffix, topic whole, never back to its origin; dropped and counted when it cannot go", async () => {
    const a = await FakeEdge.connect("ra");
    const b = await FakeEdge.connect("rb");
    const p = (s: string) => Buffer.from(s);
    await hub.relayDown(sk, "t/_edge/rb", p("one"), 1);
    await hub.relayDown(sk, "t/_broadcast", p("all"), 0);
    await hub.relayDown(sk, "t/_broadcast", p("from-a"), 0, "ra");
    await hub.relayDown(sk, "t/_edgeAndPlatform/ra", p("both"), 2);
    await hub.relayDown(sk, "t/_platform", p("up only"), 0);
    await hub.relayDown(sk, "t/plain", p("plain"), 0);
    expect(b.relayed).toEqual([{ topic: "t/_edge/rb", payload: "one", qos: 1 }, { topic: "t/_broadcast", payload: "all", qos: 0 }, { topic: "t/_broadcast", payload: "from-a", qos: 0 }]);
    expect(a.relayed).toEqual([{ topic: "t/_broadcast", payload: "all", qos: 0 }, { topic: "t/_edgeAndPlatform/ra", payload: "both", qos: 2 }]);

    const dropped = hub.relayDropped;
    await hub.relayDown(sk, "t/_edge/nobody", p("x"), 0);
    expect(hub.relayDropped).toBe(dropped + 1);
    // a message for its own origin is not sent and not a drop
    await hub.relayDown(sk, "t/_edge/ra", p("self"), 0, "ra");
    expect(hub.relayDropped).toBe(dropped + 1);
    // a link far behind gets no more until it catches up
    b.buffered = 9_000_000;
    await hub.relayDown(sk, "t/_edge/rb", p("behind"), 0);
    expect(hub.relayDropped).toBe(dropped + 2);
    expect(b.relayed.some((m) => m.payload === "behind")).toBe(false);
    b.buffered = 0;
    await hub.relayDown(sk, "t/_edge/rb", p("caught up"), 0);
    expect(b.relayed.at(-1)?.payload).toBe("caught up");
    // another system's edges are not reached
    const other = (await app.services.systems.create(dev, { name: "other" })).system_key;
    await hub.relayDown(other, "t/_broadcast", p("theirs"), 0);
    expect([...a.relayed, ...b.relayed].some((m) => m.payload === "theirs")).toBe(false);
  });
});
