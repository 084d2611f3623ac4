// The QoS a client was granted for a topic. MQTT 3.1.1 §3.3.5: a message matching several of a
// client's subscriptions goes to it once, at the highest QoS among them. aedes looks at the exact
// topic only, and delivers through whichever matching subscription's handler runs first (a QoS 0
// one sends at QoS 0). Scanning every filter of the client per delivery made QoS 1 delivery linear
// in its subscriptions (19 ms a message at 50,000), on the event loop. Here each client keeps its
// exact filters in a table and the others in a trie of its own, matched as mqemitter matches them,
// both kept in step with aedes' client.subscriptions through a proxy: a delivery costs a lookup
// and one match of its topic. A device that subscribes to its own topics never makes the trie (a
// trie's maps cost about 1 KB on each of 100,000 idle connections).
// @ts-expect-error qlobber ships no types; the part used here is declared by Trie below
import { Qlobber } from "qlobber";

import { startsWithWildcard } from "./shared.ts";

/** `wildcardFirst`: the filter starts with a wildcard after the system key, so topics starting
 *  with "$" there are not its ([MQTT-4.7.2-1]) */
interface Grant { qos: number; wildcardFirst: boolean }
interface Trie {
  add(filter: string, value: Grant): void;
  remove(filter: string, value: Grant): void;
  match(topic: string): Grant[];
}
const newTrie = (): Trie => new Qlobber({ separator: "/", wildcard_one: "+", wildcard_some: "#", match_empty_levels: true });

/** A shared subscription ($share/<group>/<filter>) matches as its filter. */
const matchable = (filter: string) => (filter.startsWith("$share/") ? filter.slice(filter.indexOf("/", 7) + 1) : filter);
/** A filter that matches only the topic equal to it: no wildcard, not a shared subscription. */
const isExact = (filter: string) => !filter.startsWith("$share/") && filter.indexOf("+") < 0 && filter.indexOf("#") < 0;

/** where a tracked subscriptions object keeps its grants (a symbol: aedes' Object.keys and for-in
 *  over the object never see it) */
const TRACKED = Symbol("grants");
type Tracked = Record<string | symbol, unknown> & { [TRACKED]: Grants };

/** One proxy handler for every client: per-client closures cost memory on every idle connection. */
const TRACKING: ProxyHandler<Tracked> = {
  set(target, filter, sub: { qos?: number } | undefined) {
    target[filter] = sub;
    if (typeof filter === "string") {
      const g = target[TRACKED];
      g.set(filter, sub?.qos ?? 0);
      g.onSet?.(filter, sub, g.owner);
    }
    return true;
  },
  deleteProperty(target, filter) {
    delete target[filter];
    if (typeof filter === "string") target[TRACKED].delete(filter);
    return true;
  },
};

export class Grants {
  /** exact filters' QoS, looked up by topic: aedes' own subscriptions object once tracked (a
   *  copy would cost a table, or a structure per client: the filters differ), else made at the
   *  first */
  private exact: Record<string, number> | null = null;
  private tracked: Record<string, { qos?: number } | undefined> | null = null;
  /** the other filters (wildcards, shared subscriptions) by filter as subscribed, each its own
   *  object (removing one leaves an equal one alone), and their trie; made at the first such (a
   *  device subscribed to its own topics pays for neither) */
  private byFilter: Map<string, Grant> | null = null;
  private trie: Trie | null = null;
  /** told of every subscription set through track(), with `owner` */
  onSet?: (filter: string, sub: any, owner: unknown) => void;
  owner?: unknown;

  set(filter: string, qos: number) {
    if (isExact(filter)) {
      if (this.tracked) return;
      this.exact ??= Object.create(null) as Record<string, number>;
      this.exact[filter] = qos;
      return;
    }
    const had = this.byFilter?.get(filter);
    if (had?.qos === qos) return;
    this.byFilter ??= new Map();
    this.trie ??= newTrie();
    const m = matchable(filter);
    if (had) this.trie.remove(m, had);
    const g = { qos, wildcardFirst: startsWithWildcard(m) };
    this.byFilter.set(filter, g);
    this.trie.add(m, g);
  }

  delete(filter: string) {
    if (isExact(filter)) {
      if (this.exact) delete this.exact[filter];
      return;
    }
    const had = this.byFilter?.get(filter);
    if (!had) return;
    this.byFilter!.delete(filter);
    this.trie!.remove(matchable(filter), had);
  }

  /** The highest QoS of the subscriptions matching `topic`; -1 if none does. */
  granted(topic: string): number {
    // a topic has no wildcard and starts with its system's key: only an exact filter equals it
    const sub = this.tracked?.[topic];
    let max = sub ? (sub.qos ?? 0) : (this.exact?.[topic] ?? -1);
    if (this.trie === null || this.byFilter!.size === 0) return max;
    const dollar = topic.charCodeAt(topic.indexOf("/") + 1) === 36;
    for (const g of this.trie.match(topic)) if (g.qos > max && !(dollar && g.wildcardFirst)) max = g.qos;
    return max;
  }

  /** aedes' client.subscriptions (filter -> {qos, ...}), with every change also made here (and
   *  told to `onSet`, with `owner`). */
  track<T extends { qos?: number }>(subscriptions: Record<string, T>, onSet?: (filter: string, sub: T, owner: unknown) => void, owner?: unknown): Record<string, T> {
    this.tracked = subscriptions;
    this.onSet = onSet;
    this.owner = owner;
    Object.defineProperty(subscriptions, TRACKED, { value: this });
    return new Proxy(subscriptions as unknown as Tracked, TRACKING) as unknown as Record<string, T>;
  }
}
