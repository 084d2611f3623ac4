// Signals: every listener hears a signal, synchronously and in order; a listener's promise is
// what emit returns; listeners are refused once the node has started. Ports: attached once.
import { describe, expect, test } from "bun:test";
import { Port } from "../../../src/core/port.ts";
import { Signals } from "../../../src/core/signals.ts";

describe("signals", () => {
  test("every listener runs before emit returns, in the order declared, with the payload and whether it is remote", () => {
    const s = new Signals();
    const heard: string[] = [];
    s.on("system.changed", ({ systemKey }, remote) => { heard.push(`a ${systemKey} ${remote}`); });
    s.on("system.changed", ({ systemKey }, remote) => { heard.push(`b ${systemKey} ${remote}`); });
    s.on("permissions.changed", () => { heard.push("other"); });
    expect(s.emit("system.changed", { systemKey: "k1" })).toBeUndefined();
    s.emit("system.changed", { systemKey: "k2" }, true);
    expect(heard).toEqual(["a k1 false", "b k1 false", "a k2 true", "b k2 true"]);
  });

  test("emit returns a promise settled once every listener's promise has", async () => {
    const s = new Signals();
    let done = false;
    s.on("triggers.changed", async () => { await Bun.sleep(5); done = true; });
    s.on("triggers.changed", () => {});
    const p = s.emit("triggers.changed", { systemKey: "k" });
    expect(p).toBeInstanceOf(Promise);
    expect(done).toBe(false);
    await p;
    expect(done).toBe(true);
  });

  test("a signal nobody listens to costs nothing and returns nothing", () => {
    expect(new Signals().emit("collection.written", { collectionId: "c" })).toBeUndefined();
  });

  test("a listener declared after start is refused", () => {
    const s = new Signals();
    s.on("system.changed", () => {});
    s.start();
    expect(() => s.on("system.changed", () => {})).toThrow(/before the node starts/);
  });
});

describe("ports", () => {
  test("nothing until attached, the implementation once attached, and a second attach throws", () => {
    const port = new Port<{ n(): number }>("numbers");
    expect(port.get()).toBeNull();
    port.attach({ n: () => 1 });
    expect(port.get()?.n()).toBe(1);
    expect(() => port.attach({ n: () => 2 })).toThrow(/'numbers' is already attached/);
    expect(port.get()?.n()).toBe(1);
  });
});
