// A run's inbox on its own: filters, queueing before a wait, the queue bound, unsubscribe, close.
import { describe, expect, test } from "bun:test";
import { RunInbox } from "../../../src/code/inbox.ts";

/** A fake broker side: records subscriptions and lets the test deliver to them. */
function broker() {
  const live = new Map<string, (topic: string, payload: Buffer) => void>();
  return {
    live,
    open: async (filter: string, deliver: (topic: string, payload: Buffer) => void) => {
      if (filter === "refused") throw new Error("no permission");
      live.set(filter, deliver);
      return async () => { live.delete(filter); };
    },
    send(filter: string, topic: string, text: string) { live.get(filter)?.(topic, Buffer.from(text)); },
  };
}

describe("RunInbox", () => {
  test("a waiter gets the next message on its filters; others wait in the queue", async () => {
    const b = broker();
    const inbox = new RunInbox(b.open);
    await inbox.subscribe("s/+/t");
    expect(inbox.subscribed).toBe(true);
    b.send("s/+/t", "s/a/t", "one");
    b.send("s/+/t", "s/b/t", "two");
    expect(await inbox.next(["s/b/t"])).toEqual({ topic: "s/b/t", payload: "two" });
    expect(await inbox.next(null)).toEqual({ topic: "s/a/t", payload: "one" });
    const waiting = inbox.next(["s/c/#"]);
    b.send("s/+/t", "s/a/t", "not for it");
    b.send("s/+/t", "s/c/t", "for it");
    expect(await waiting).toEqual({ topic: "s/c/t", payload: "for it" });
    expect(await inbox.next(null)).toEqual({ topic: "s/a/t", payload: "not for it" });
  });

  test("the queue keeps the newest messages up to its bound", async () => {
    const b = broker();
    const inbox = new RunInbox(b.open);
    await inbox.subscribe("q");
    for (let i = 0; i < 1_005; i++) b.send("q", "q", String(i));
    expect(inbox.dropped).toBe(5);
    expect((await inbox.next(null))?.payload).toBe("5");
  });

  test("unsubscribe and close end the subscriptions; close answers waiters with null", async () => {
    const b = broker();
    const inbox = new RunInbox(b.open);
    await inbox.subscribe("a");
    await inbox.subscribe("a"); // once only
    await inbox.subscribe("b");
    expect([...b.live.keys()].sort()).toEqual(["a", "b"]);
    await inbox.unsubscribe("a");
    expect([...b.live.keys()]).toEqual(["b"]);
    const waiting = inbox.next(null);
    await inbox.close();
    expect(await waiting).toBeNull();
    expect(b.live.size).toBe(0);
    expect(await inbox.next(null)).toBeNull();
    b.send("b", "b", "late"); // nothing to deliver to, and no error
  });

  test("a wait on a shared subscription ($share/<group>/<filter>) takes what its filter matches", async () => {
    // ClearBlade's stream-service template subscribes to "$share/G/device/+" and waits on that same
    // string: the messages come on their own topics (device/a), which the group prefix never names
    const b = broker();
    const inbox = new RunInbox(b.open);
    await inbox.subscribe("$share/G/device/+");
    b.send("$share/G/device/+", "device/a", "queued");
    expect(await inbox.next(["$share/G/device/+"])).toEqual({ topic: "device/a", payload: "queued" });
    const waiting = inbox.next(["$share/G/device/+"]);
    b.send("$share/G/device/+", "device/b", "waited for");
    expect(await waiting).toEqual({ topic: "device/b", payload: "waited for" });
    b.send("$share/G/device/+", "device/c", "other filter");
    expect(await Promise.race([inbox.next(["$share/G/other/+"]), Bun.sleep(50).then(() => "none")])).toBe("none");
    await inbox.close();
  });

  test("a refused subscription is an error and leaves nothing behind", async () => {
    const inbox = new RunInbox(broker().open);
    await expect(inbox.subscribe("refused")).rejects.toThrow("no permission");
    expect(inbox.subscribed).toBe(false);
  });
});
