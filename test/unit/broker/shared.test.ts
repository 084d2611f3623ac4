import { describe, expect, test } from "bun:test";
import { dollarBlocked, parseShare, startsWithWildcard } from "../../../src/broker/shared.ts";

describe("shared subscription filters", () => {
  test("$share/<group>/<filter>: a group name without wildcards and a filter", () => {
    expect(parseShare("$share/g/k/a/#")).toEqual({ group: "g", filter: "k/a/#" });
    expect(parseShare("$share/g/+")).toEqual({ group: "g", filter: "+" });
    for (const f of ["$share/g", "$share//a", "$share/g+/a", "$share/#/a", "$share/g/", "share/g/a", "k/$share/g/a"]) expect(parseShare(f)).toBeNull();
  });
});

describe("[MQTT-4.7.2-1] in a system's space", () => {
  test("a filter starting with a wildcard after the system key does not match a $ topic there", () => {
    expect(dollarBlocked("k/#", "k/$SYS/x")).toBe(true);
    expect(dollarBlocked("k/+/x", "k/$a/x")).toBe(true);
    expect(dollarBlocked("k/#", "k/a/$x")).toBe(false); // only the first level counts
    expect(dollarBlocked("k/$a/#", "k/$a/x")).toBe(false);
    expect(dollarBlocked("k/a/#", "k/a/x")).toBe(false);
    expect(dollarBlocked("k/#", "k/a")).toBe(false);
    expect(startsWithWildcard("k/#")).toBe(true);
    expect(startsWithWildcard("k/+")).toBe(true);
    expect(startsWithWildcard("k/a/#")).toBe(false);
  });
});
