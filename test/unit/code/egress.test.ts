// src/code/egress.ts: the allow list (parsing and its errors), CIDR matching for IPv4 and IPv6,
// IPv4-mapped and embedded forms, names, the ranges refused by default, and resolution (every
// address must pass).
import { describe, expect, test } from "bun:test";
import { addressBytes, EgressPolicy, type Lookup, refusedRange } from "../../../src/code/egress.ts";
import { ApiError } from "../../../src/core/errors.ts";

const DEFAULT = EgressPolicy.DEFAULT;
const fakeLookup = (table: Record<string, string[]>): Lookup & { calls: string[] } => {
  const calls: string[] = [];
  const f = async (host: string) => {
    calls.push(host);
    const a = table[host];
    if (!a) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" });
    return a.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
  };
  return Object.assign(f, { calls });
};

async function refusedWith(p: Promise<unknown>): Promise<ApiError> {
  let thrown: unknown;
  try { await p; } catch (e) { thrown = e; }
  expect(thrown).toBeInstanceOf(ApiError);
  return thrown as ApiError;
}

describe("addresses", () => {
  test("IPv4 and IPv6 text become 16 bytes, IPv4 as its mapped form; anything else is not an address", () => {
    expect([...addressBytes("1.2.3.4")!]).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 1, 2, 3, 4]);
    expect(addressBytes("::ffff:1.2.3.4")).toEqual(addressBytes("1.2.3.4"));
    expect(addressBytes("::ffff:102:304")).toEqual(addressBytes("1.2.3.4"));
    expect(addressBytes("[::1]")).toEqual(addressBytes("0:0:0:0:0:0:0:1"));
    expect([...addressBytes("1:2:3:4:5:6:7:8")!]).toEqual([0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8]);
    expect([...addressBytes("fe80::1%eth0")!].slice(0, 2)).toEqual([0xfe, 0x80]);
    for (const bad of ["", "1.2.3", "256.1.1.1", "01.2.3.4", "1:2:3:4:5:6:7:8:9", "localhost", "::g"]) expect(addressBytes(bad)).toBeNull();
  });
});

describe("the ranges refused by default", () => {
  test("loopback, link-local (metadata), private, CGNAT, unspecified, multicast, broadcast, reserved; IPv4 and IPv6", () => {
    const cases: [string, string][] = [
      ["127.0.0.1", "127.0.0.0/8"], ["127.255.255.254", "127.0.0.0/8"], ["::1", "::1/128"],
      ["169.254.169.254", "169.254.0.0/16"], ["fe80::1", "fe80::/10"], ["febf:ffff::1", "fe80::/10"],
      ["10.255.255.1", "10.0.0.0/8"], ["172.16.0.1", "172.16.0.0/12"], ["172.31.255.255", "172.16.0.0/12"], ["192.168.1.1", "192.168.0.0/16"],
      ["fc00::1", "fc00::/7"], ["fdff::1", "fc00::/7"], ["100.64.0.1", "100.64.0.0/10"], ["100.127.255.255", "100.64.0.0/10"],
      ["0.0.0.0", "0.0.0.0/8"], ["::", "::/128"], ["224.0.0.1", "224.0.0.0/4"], ["239.255.255.255", "224.0.0.0/4"], ["ff02::1", "ff00::/8"],
      ["255.255.255.255", "255.255.255.255/32"], ["240.0.0.1", "240.0.0.0/4"], ["192.0.2.1", "192.0.2.0/24"], ["198.18.0.1", "198.18.0.0/15"],
      ["2001:db8::1", "2001:db8::/32"], ["::7f00:1", "::/8"], ["fec0::1", "fec0::/10"],
    ];
    for (const [a, range] of cases) expect({ a, range: refusedRange(a)?.range }).toEqual({ a, range });
  });

  test("IPv4-mapped IPv6 forms, and IPv4 embedded in NAT64 and 6to4, are judged as the IPv4 address", () => {
    for (const a of ["::ffff:127.0.0.1", "::ffff:7f00:1", "::ffff:169.254.169.254", "::ffff:10.0.0.1", "::ffff:0.0.0.0", "64:ff9b::a9fe:a9fe", "2002:7f00:1::1"])
      expect({ a, refused: refusedRange(a) !== null }).toEqual({ a, refused: true });
    expect(refusedRange("::ffff:127.0.0.1")!.what).toContain("loopback");
    expect(refusedRange("64:ff9b::a9fe:a9fe")!.range).toBe("169.254.0.0/16");
    for (const a of ["::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"]) expect({ a, refused: refusedRange(a) }).toEqual({ a, refused: null });
  });

  test("public addresses pass, next to the edges of the refused ranges", () => {
    for (const a of ["8.8.8.8", "1.1.1.1", "172.15.255.255", "172.32.0.0", "100.63.255.255", "100.128.0.0", "169.253.255.255", "11.0.0.0",
      "9.255.255.255", "192.169.0.0", "223.255.255.255", "2606:4700:4700::1111", "2a00:1450::1", "fbff::1"])
      expect({ a, refused: refusedRange(a) }).toEqual({ a, refused: null });
  });

  test("the default policy refuses them, naming the address, what it is and its range", () => {
    expect(DEFAULT.refusal("8.8.8.8")).toBeNull();
    expect(DEFAULT.refusal("169.254.169.254")).toBe("169.254.169.254, a link-local address (the cloud metadata service among them) (169.254.0.0/16), which --code-egress-allow does not allow");
    expect(DEFAULT.refusal("127.0.0.1", "localhost")).toContain("'localhost' resolves to 127.0.0.1, a loopback address (127.0.0.0/8)");
    expect(DEFAULT.refusal("::ffff:10.0.0.1", "db.internal")).toContain("'db.internal' resolves to 10.0.0.1, a private address (10.0.0.0/8)");
    expect(DEFAULT.refusal("not-an-address")).toContain("is not an IP address");
  });
});

describe("the allow list", () => {
  test("addresses, CIDR ranges (IPv4 and IPv6) and names allow what they name, and nothing next to it", () => {
    const p = EgressPolicy.parse("127.0.0.1, 10.0.0.0/8,fd00::/8 ,::1,api.internal,*.corp.example");
    expect(p.entries).toEqual(["127.0.0.1", "10.0.0.0/8", "fd00::/8", "::1", "api.internal", "*.corp.example"]);
    expect(p.refusal("127.0.0.1")).toBeNull();
    expect(p.refusal("::ffff:127.0.0.1")).toBeNull(); // the mapped form of an allowed address
    expect(p.refusal("127.0.0.2")).toContain("loopback");
    expect(p.refusal("10.0.0.0")).toBeNull();
    expect(p.refusal("10.255.255.255")).toBeNull();
    expect(p.refusal("11.0.0.0")).toBeNull(); // public anyway
    expect(p.refusal("172.16.0.1")).toContain("private");
    expect(p.refusal("fd12:3456::1")).toBeNull();
    expect(p.refusal("fc00::1")).toContain("unique local");
    expect(p.refusal("::1")).toBeNull();
    // an allowed name reaches whatever it resolves to; its neighbours do not
    expect(p.refusal("192.168.1.10", "api.internal")).toBeNull();
    expect(p.refusal("192.168.1.10", "API.Internal.")).toBeNull();
    expect(p.refusal("192.168.1.10", "x.api.internal")).toContain("private");
    expect(p.refusal("192.168.1.10", "a.b.corp.example")).toBeNull();
    expect(p.refusal("192.168.1.10", "corp.example")).toContain("private");
  });

  test("CIDR prefixes match on bit boundaries, v4 and v6", () => {
    const p = EgressPolicy.parse("192.168.4.0/22,fe80::/64,0.0.0.0/32");
    for (const a of ["192.168.4.0", "192.168.7.255", "fe80::abcd", "0.0.0.0"]) expect({ a, r: p.refusal(a) }).toEqual({ a, r: null });
    for (const a of ["192.168.3.255", "192.168.8.0", "fe80:0:0:1::1", "0.0.0.1"]) expect(p.refusal(a)).not.toBeNull();
    expect(EgressPolicy.parse("0.0.0.0/0").refusal("10.1.2.3")).toBeNull();
    expect(EgressPolicy.parse("::/0").refusal("fd00::1")).toBeNull();
  });

  test("an empty list, a list of entries, and spaces and empty items", () => {
    expect(EgressPolicy.parse("").entries).toEqual([]);
    expect(EgressPolicy.parse(" , ,").entries).toEqual([]);
    expect(EgressPolicy.parse(["127.0.0.1", " api.internal "]).entries).toEqual(["127.0.0.1", "api.internal"]);
  });

  test("a wrong entry is refused, saying which and why", () => {
    const bad: [string, string][] = [
      ["10.0.0.0/33", "the prefix '/33' must be a number from 0 to 32"],
      ["fe80::/129", "from 0 to 128"],
      ["10.1.0.0/8", "did you mean 10.0.0.0/8?"],
      ["fe80::1/10", "did you mean fe80::/10?"],
      ["300.1.1.1", "is not an IP address"],
      ["1.2.3", "is not an IP address"],
      ["10.0.0.0/x", "the prefix '/x'"],
      ["[::1]", "is not an IP address"],
      ["fe80::1%eth0", "is not an IP address"],
      ["a b", "is not a host name"],
      ["-x.example", "is not a host name"],
      ["x..example", "is not a host name"],
      ["http://x.example", "is not a host name"],
      ["*", "is not a host name"],
      [`${"a".repeat(64)}.example`, "is not a host name"],
    ];
    for (const [entry, why] of bad) {
      let msg = "";
      try { EgressPolicy.parse(`127.0.0.1,${entry}`); } catch (e) { msg = (e as Error).message; }
      expect({ entry, msg }).toEqual({ entry, msg: expect.stringContaining(`'${entry}'`) });
      expect(msg).toContain(why);
    }
  });
});

describe("resolve", () => {
  test("a name passes when every address it resolves to passes, and is looked up once", async () => {
    const lookup = fakeLookup({ "public.test": ["93.184.215.14", "2606:2800::1"], "mixed.test": ["93.184.215.14", "10.0.0.5"], "local.test": ["127.0.0.1"] });
    expect(await DEFAULT.resolve("public.test", lookup)).toEqual(["93.184.215.14", "2606:2800::1"]);
    const e = await refusedWith(DEFAULT.resolve("mixed.test", lookup));
    expect(e.kind.code).toBe(408);
    expect(e.detail).toBe("egress refused: 'mixed.test' resolves to 10.0.0.5, a private address (10.0.0.0/8), which --code-egress-allow does not allow");
    expect(lookup.calls).toEqual(["public.test", "mixed.test"]);
    expect(await EgressPolicy.parse("127.0.0.1").resolve("local.test", lookup)).toEqual(["127.0.0.1"]);
    expect(await EgressPolicy.parse("local.test").resolve("LOCAL.test.", lookup)).toEqual(["127.0.0.1"]);
  });

  test("an address is not looked up; brackets and case do not matter", async () => {
    const lookup = fakeLookup({});
    expect(await DEFAULT.resolve("8.8.8.8", lookup)).toEqual(["8.8.8.8"]);
    expect((await refusedWith(DEFAULT.resolve("[::1]", lookup))).detail).toContain("::1, a loopback address");
    expect((await refusedWith(DEFAULT.resolve("[::FFFF:7F00:1]", lookup))).detail).toContain("127.0.0.1, a loopback address");
    expect(lookup.calls).toEqual([]);
  });

  test("a name that does not resolve is an error saying so", async () => {
    const e = await refusedWith(DEFAULT.resolve("nowhere.test", fakeLookup({})));
    expect(e.kind.code).toBe(409);
    expect(e.detail).toBe("could not resolve 'nowhere.test' (ENOTFOUND)");
    expect((await refusedWith(DEFAULT.resolve("empty.test", fakeLookup({ "empty.test": [] })))).detail).toContain("no addresses");
  });

  test("localhost through the system's resolver is loopback, refused by default", async () => {
    const e = await refusedWith(DEFAULT.resolve("localhost"));
    expect(e.detail).toMatch(/'localhost' resolves to (127\.0\.0\.1|::1), a loopback address/);
  });
});
