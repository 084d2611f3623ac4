// The QoS a client was granted for a topic. MQTT 3.1.1 §3.3.5: a message matching several of a
// client's subscriptions goes to it once, at the highest QoS among them. aedes looks at the exact
// topic only, and delivers through whichever matching subscription's handler runs first (a QoS 0
// one sends at QoS 0). Scanning every filter of the client per delivery made QoS 1 delivery linear
// in its subscriptions (19 ms a message at 50,000), on the event loop. Here each client keeps its
// filters in a trie of its own, matched as mqemitter matches them, kept in step with aedes'
// client.subscriptions through a proxy: a delivery costs one match of its topic.
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

export class Grants {
  /** by filter as subscribed; each its own object, so removing one leaves an equal one alone */
  private readonly byFilter = new Map<string, Grant>();
  /** made at the first subscription: an idle connection pays nothing */
  private trie: Trie | null = null;

  set(filter: string, qos: number) {
    const had = this.byFilter.get(filter);
    if (had?.qos === qos) return;
    this.trie ??= newTrie();
    if (had) this.trie.remove(matchable(filter), had);
    const m = matchable(filter);
    const g = { qos, wildcardFirst: startsWithWildcard(m) };
    this.byFilter.set(filter, g);
    this.trie.add(matchable(filter), g);
  }

  delete(filter: string) {
    const had = this.byFilter.get(filter);
    if (!had) return;
    this.byFilter.delete(filter);
    this.trie!.remove(matchable(filter), had);
  }

  /** The highest QoS of the subscriptions matching `topic`; -1 if none does. */
  granted(topic: string): number {
    if (this.trie === null || this.byFilter.size === 0) return -1;
    let max = -1;
    const dollar = topic.charCodeAt(topic.indexOf("/") + 1) === 36;
    for (const g of this.trie.match(topic)) if (g.qos > max && !(dollar && g.wildcardFirst)) max = g.qos;
    return max;
  }

  /** aedes' client.subscriptions (filter -> {qos, ...}), with every change also made here (and
   *  told to `onSet`). */
  track<T extends { qos?: number }>(subscriptions: Record<string, T>, onSet?: (filter: string, sub: T) => void): Record<string, T> {
    return new Proxy(subscriptions, {
      set: (target, filter, sub: T) => {
        target[filter as string] = sub;
        if (typeof filter === "string") { this.set(filter, sub?.qos ?? 0); onSet?.(filter, sub); }
        return true;
      },
      deleteProperty: (target, filter) => {
        delete target[filter as string];
        if (typeof filter === "string") this.delete(filter);
        return true;
      },
    });
  }
}
