// A client's grants: the highest QoS among its subscriptions matching a topic, kept in step with
// aedes' subscriptions object through the proxy.
import { describe, expect, test } from "bun:test";
import { Grants } from "../../../src/broker/grants.ts";

describe("Grants", () => {
  test("no subscriptions: -1", () => {
    expect(new Grants().granted("k/a")).toBe(-1);
  });

  test("the highest matching QoS over exact, '+' and '#' filters", () => {
    const g = new Grants();
    g.set("k/#", 0);
    g.set("k/+/x", 1);
    g.set("k/a/x", 2);
    expect(g.granted("k/a/x")).toBe(2);
    expect(g.granted("k/b/x")).toBe(1);
    expect(g.granted("k/b/y")).toBe(0);
    expect(g.granted("k")).toBe(0); // "k/#" also matches its parent
    expect(g.granted("other/a/x")).toBe(-1);
  });

  test("a filter subscribed again replaces its QoS; delete removes only that filter", () => {
    const g = new Grants();
    g.set("k/a", 2);
    g.set("k/+", 1);
    g.set("k/a", 0);
    expect(g.granted("k/a")).toBe(1);
    g.delete("k/+");
    expect(g.granted("k/a")).toBe(0);
    g.delete("k/a");
    g.delete("k/never");
    expect(g.granted("k/a")).toBe(-1);
  });

  test("a shared subscription matches as its filter, and is removed on its own", () => {
    const g = new Grants();
    g.set("$share/grp/k/t", 2);
    g.set("k/t", 2);
    expect(g.granted("k/t")).toBe(2);
    g.delete("$share/grp/k/t");
    expect(g.granted("k/t")).toBe(2);
    g.delete("k/t");
    expect(g.granted("k/t")).toBe(-1);
  });

  test("track: writes and deletes on the subscriptions object reach the grants", () => {
    const g = new Grants();
    const subs = g.track<{ qos: number }>(Object.create(null));
    subs["k/#"] = { qos: 1 };
    subs["k/a"] = { qos: 2 };
    expect(g.granted("k/a")).toBe(2);
    expect(Object.keys(subs).sort()).toEqual(["k/#", "k/a"]);
    expect(subs["k/a"]?.qos).toBe(2);
    delete subs["k/a"];
    expect(g.granted("k/a")).toBe(1);
    expect("k/a" in subs).toBe(false);
  });

  test("track: exact filters are read from the subscriptions object itself, wildcards from the trie", () => {
    const g = new Grants();
    const target: Record<string, { qos: number }> = Object.create(null);
    const subs = g.track<{ qos: number }>(target);
    subs["k/cmd/a"] = { qos: 1 };
    expect(g.granted("k/cmd/a")).toBe(1);
    target["k/cmd/a"]!.qos = 0; // read when a message comes, never copied
    expect(g.granted("k/cmd/a")).toBe(0);
    subs["k/cmd/+"] = { qos: 2 };
    expect(g.granted("k/cmd/a")).toBe(2);
    expect(g.granted("k/cmd/b")).toBe(2);
    delete subs["k/cmd/+"];
    expect(g.granted("k/cmd/b")).toBe(-1);
    expect(g.granted("k/cmd/a")).toBe(0);
    // what the proxy keeps for itself is not one of the client's filters
    expect(Object.keys(subs)).toEqual(["k/cmd/a"]);
    expect(Object.getOwnPropertyNames(target)).toEqual(["k/cmd/a"]);
  });

  test("track: a subscription is told to onSet with its owner", () => {
    const g = new Grants();
    const seen: [string, number, unknown][] = [];
    const owner = { id: "client" };
    const subs = g.track<{ qos: number }>(Object.create(null), (filter, sub, who) => seen.push([filter, sub.qos, who]), owner);
    subs["$share/grp/k/t"] = { qos: 1 };
    subs["k/x"] = { qos: 0 };
    expect(seen).toEqual([["$share/grp/k/t", 1, owner], ["k/x", 0, owner]]);
    expect(g.granted("k/t")).toBe(1);
  });

  test("matching cost does not grow with unrelated subscriptions", () => {
    const time = (g: Grants) => { const t0 = performance.now(); for (let i = 0; i < 20_000; i++) g.granted("k/t/x"); return performance.now() - t0; };
    const small = new Grants();
    small.set("k/t/x", 1);
    const big = new Grants();
    for (let i = 0; i < 50_000; i++) big.set(`k/f${i}/x`, 1);
    big.set("k/t/x", 1);
    time(small); time(big); // warm
    expect(time(big)).toBeLessThan(time(small) * 5 + 20);
  });
});
