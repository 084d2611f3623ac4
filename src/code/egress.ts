// The egress policy: which addresses code services may open connections to. By default only
// public addresses: loopback, link-local (the cloud metadata service at 169.254.169.254 among
// them), private, shared (CGNAT), unspecified, multicast, broadcast and reserved ranges reach the
// node itself or the network it sits in, not the internet, and a tenant's code must not reach them
// unless the operator allows it (--code-egress-allow: host names, addresses and CIDR ranges).
//
// The check is on addresses, after resolution: a name passes only if every address it resolves
// to passes, and the caller must then connect to one of exactly those addresses (see
// outbound.ts) so that a second lookup cannot answer differently (DNS rebinding). Every address
// is held as 16 bytes, an IPv4 address as its IPv4-mapped IPv6 form (::ffff:a.b.c.d), so that a
// mapped address is judged as the IPv4 address it is, by the same ranges.
import { lookup as dnsLookup } from "node:dns/promises";
import { isIPv4, isIPv6 } from "node:net";
import { fail } from "../core/errors.ts";

/** An address as 16 bytes (IPv4 mapped into IPv6). */
type Bytes = Uint8Array;

interface Range { bytes: Bytes; prefix: number; text: string }

/** Resolves a name to all its addresses (dns.lookup with all:true; tests pass their own). */
export type Lookup = (host: string) => Promise<{ address: string; family: number }[]>;

export const systemLookup: Lookup = (host) => dnsLookup(host, { all: true, verbatim: true });

/** An IPv4 or IPv6 address as 16 bytes, or null when it is not one. A zone (fe80::1%eth0) is
 *  dropped: it names an interface, not another address. */
export function addressBytes(text: string): Bytes | null {
  const t = text.replace(/^\[(.*)\]$/, "$1").replace(/%.*$/, "");
  if (isIPv4(t)) {
    const b = new Uint8Array(16);
    b[10] = 0xff; b[11] = 0xff;
    t.split(".").forEach((p, i) => { b[12 + i] = Number(p); });
    return b;
  }
  if (!isIPv6(t)) return null;
  // the last group may be an IPv4 address (::ffff:1.2.3.4): make it two hex groups
  let s = t;
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(s);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    s = s.slice(0, v4.index) + ((a << 8) | b).toString(16) + ":" + ((c << 8) | d).toString(16);
  }
  const [head, tail] = s.includes("::") ? s.split("::") as [string, string] : [s, undefined];
  const h = head ? head.split(":") : [];
  const tl = tail === undefined ? [] : tail ? tail.split(":") : [];
  const groups = tail === undefined ? h : [...h, ...new Array(8 - h.length - tl.length).fill("0"), ...tl];
  if (groups.length !== 8) return null;
  const out = new Uint8Array(16);
  groups.forEach((g, i) => { const n = Number.parseInt(g, 16); out[2 * i] = n >> 8; out[2 * i + 1] = n & 0xff; });
  return out;
}

const isMapped = (b: Bytes) => b.slice(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff;

/** An address in its usual text: dotted for IPv4 (mapped ones too), else IPv6 as given. */
function addressText(b: Bytes, original: string): string {
  return isMapped(b) ? `${b[12]}.${b[13]}.${b[14]}.${b[15]}` : original.replace(/^\[(.*)\]$/, "$1");
}

function inRange(b: Bytes, r: Range): boolean {
  const whole = r.prefix >> 3, rest = r.prefix & 7;
  for (let i = 0; i < whole; i++) if (b[i] !== r.bytes[i]) return false;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return (b[whole]! & mask) === (r.bytes[whole]! & mask);
}

/** A CIDR range (or one address) as a Range, or the reason it is not one. */
function parseRange(text: string): Range | string {
  const slash = text.indexOf("/");
  const addr = slash < 0 ? text : text.slice(0, slash);
  const bytes = addressBytes(addr);
  if (!bytes || addr.includes("%") || addr.startsWith("[")) return `'${addr}' is not an IP address`;
  const v4 = isIPv4(addr);
  const max = v4 ? 32 : 128;
  let prefix = max;
  if (slash >= 0) {
    const p = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(p) || Number(p) > max) return `the prefix '/${p}' must be a number from 0 to ${max}`;
    prefix = Number(p);
  }
  const r: Range = { bytes, prefix: v4 ? prefix + 96 : prefix, text };
  // a range with bits set past its prefix is most likely a typo: say what was meant
  const masked = new Uint8Array(16);
  for (let i = 0; i < 128; i++) if (i < r.prefix && (bytes[i >> 3]! >> (7 - (i & 7))) & 1) masked[i >> 3]! |= 1 << (7 - (i & 7));
  if (masked.some((x, i) => x !== bytes[i])) {
    const base = v4 ? `${masked[12]}.${masked[13]}.${masked[14]}.${masked[15]}` : ipv6Text(masked);
    return `'${text}' has address bits set past its prefix (did you mean ${base}/${prefix}?)`;
  }
  return r;
}

function ipv6Text(b: Bytes): string {
  const g: string[] = [];
  for (let i = 0; i < 16; i += 2) g.push(((b[i]! << 8) | b[i + 1]!).toString(16));
  // the longest run of zero groups becomes ::
  let best = -1, bestLen = 1;
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && g[j] === "0") j++;
    if (j - i > bestLen) { best = i; bestLen = j - i; }
    i = j === i ? i + 1 : j;
  }
  if (best < 0) return g.join(":");
  return `${g.slice(0, best).join(":")}::${g.slice(best + bestLen).join(":")}`;
}

const range = (text: string, what: string): Range & { what: string; v4: boolean } => {
  const r = parseRange(text);
  if (typeof r === "string") throw new Error(r);
  return { ...r, what, v4: isIPv4(text.split("/")[0]!) };
};

/** The ranges refused by default, each with what it is (IANA's special-purpose registries).
 *  Ranges that embed an IPv4 address (NAT64, 6to4) are judged by that address instead. */
const REFUSED: readonly (Range & { what: string; v4: boolean })[] = [
  range("0.0.0.0/8", "an unspecified ('this network') address"),
  range("10.0.0.0/8", "a private address"),
  range("100.64.0.0/10", "a shared (CGNAT) address"),
  range("127.0.0.0/8", "a loopback address"),
  range("169.254.0.0/16", "a link-local address (the cloud metadata service among them)"),
  range("172.16.0.0/12", "a private address"),
  range("192.0.0.0/24", "a reserved address (IETF protocol assignments)"),
  range("192.0.2.0/24", "a reserved address (documentation)"),
  range("192.88.99.0/24", "a reserved address (6to4 relay)"),
  range("192.168.0.0/16", "a private address"),
  range("198.18.0.0/15", "a reserved address (benchmarking)"),
  range("198.51.100.0/24", "a reserved address (documentation)"),
  range("203.0.113.0/24", "a reserved address (documentation)"),
  range("224.0.0.0/4", "a multicast address"),
  range("255.255.255.255/32", "the broadcast address"),
  range("240.0.0.0/4", "a reserved address"),
  range("::/128", "the unspecified address"),
  range("::1/128", "a loopback address"),
  range("::/8", "a reserved address"),
  range("64:ff9b:1::/48", "a private address (local NAT64)"),
  range("100::/64", "a reserved address (discard-only)"),
  range("2001:db8::/32", "a reserved address (documentation)"),
  range("2001::/23", "a reserved address (IETF protocol assignments)"),
  range("3fff::/20", "a reserved address (documentation)"),
  range("fc00::/7", "a private (unique local) address"),
  range("fe80::/10", "a link-local address"),
  range("fec0::/10", "a private (site-local) address"),
  range("ff00::/8", "a multicast address"),
];
const NAT64 = range("64:ff9b::/96", "");
const SIX_TO_FOUR = range("2002::/16", "");

/** The IPv4 address an IPv6 address stands for (mapped, NAT64, 6to4), as mapped bytes. */
function embeddedIPv4(b: Bytes): Bytes | null {
  if (isMapped(b)) return null;
  const out = new Uint8Array(16);
  out[10] = 0xff; out[11] = 0xff;
  if (inRange(b, NAT64)) { out.set(b.slice(12, 16), 12); return out; }
  if (inRange(b, SIX_TO_FOUR)) { out.set(b.slice(2, 6), 12); return out; }
  return null;
}

/** The default range refusing an address, null for a public address. */
export function refusedRange(address: string): { range: string; what: string } | null {
  const b = addressBytes(address);
  if (!b) return { range: "", what: "not an IP address" };
  const judged = embeddedIPv4(b) ?? b;
  // an IPv4 address is judged by the IPv4 ranges only (its mapped form lies inside ::/8)
  const v4 = isMapped(judged);
  const r = REFUSED.find((x) => x.v4 === v4 && inRange(judged, x));
  return r ? { range: r.text, what: r.what } : null;
}

const HOST_NAME = /^(\*\.)?(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9])?)*$/;

/** A URL host or a name as the policy compares names: lower case, no trailing dot, no brackets. */
const hostKey = (host: string) => host.toLowerCase().replace(/^\[(.*)\]$/, "$1").replace(/\.$/, "");

export class EgressPolicy {
  private constructor(
    /** the list as given, normalized */
    readonly entries: readonly string[],
    private readonly ranges: readonly Range[],
    private readonly names: ReadonlySet<string>,
    /** "*.example.com" entries, as ".example.com" */
    private readonly suffixes: readonly string[],
  ) {}

  /** The policy of an allow list (a comma list, or its entries). Throws an Error saying which entry
   *  is wrong and why. */
  static parse(list: string | readonly string[]): EgressPolicy {
    const items = (typeof list === "string" ? list.split(",") : list).map((x) => String(x).trim()).filter((x) => x !== "");
    const ranges: Range[] = [], names = new Set<string>(), suffixes: string[] = [];
    for (const item of items) {
      const t = item.toLowerCase();
      // what looks like an address must be one: a typo never becomes a host name
      if (t.includes("/") || t.includes(":") || /^[\d.]+$/.test(t)) {
        const r = parseRange(t);
        if (typeof r === "string") throw new Error(`'${item}' is not a host name, an IP address or a CIDR range: ${r}`);
        ranges.push(r);
      } else if (HOST_NAME.test(t.replace(/\.$/, ""))) {
        const name = t.replace(/\.$/, "");
        if (name.startsWith("*.")) suffixes.push(name.slice(1));
        else names.add(name);
      } else throw new Error(`'${item}' is not a host name, an IP address or a CIDR range`);
    }
    return new EgressPolicy(items, ranges, names, suffixes);
  }

  static readonly DEFAULT = EgressPolicy.parse("");

  /** Whether the list allows the host name itself (then any address it resolves to). */
  allowsName(host: string): boolean {
    const h = hostKey(host);
    return this.names.has(h) || this.suffixes.some((s) => h.endsWith(s) && h.length > s.length);
  }

  /** Why `address` may not be reached (as `host`, the name it was resolved from), or null when it
   *  may: a public address, an address the list allows, or a host name the list allows. */
  refusal(address: string, host = address): string | null {
    if (this.allowsName(host)) return null;
    const b = addressBytes(address);
    if (!b) return `'${address}' is not an IP address`;
    if (this.ranges.some((r) => inRange(b, r))) return null;
    const refused = refusedRange(address);
    if (!refused) return null;
    const text = addressText(b, address);
    const via = hostKey(host) === hostKey(address) ? text : `'${hostKey(host)}' resolves to ${text}`;
    return `${via}, ${refused.what} (${refused.range}), which --code-egress-allow does not allow`;
  }

  /** The addresses `host` may be reached at: every address it resolves to, each allowed, or an
   *  EGRESS_REFUSED error naming the first that is not. An address literal is not looked up. */
  async resolve(host: string, lookup: Lookup = systemLookup): Promise<string[]> {
    const h = hostKey(host);
    let addresses: string[];
    if (addressBytes(h) && !h.includes("%")) addresses = [h];
    else {
      try { addresses = (await lookup(h)).map((a) => a.address); }
      catch (e) { throw fail("OUTBOUND_FAILED", `could not resolve '${h}' (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`); }
      if (addresses.length === 0) throw fail("OUTBOUND_FAILED", `could not resolve '${h}' (no addresses)`);
    }
    for (const a of addresses) {
      const why = this.refusal(a, h);
      if (why) throw fail("EGRESS_REFUSED", `egress refused: ${why}`);
    }
    return addresses;
  }
}
