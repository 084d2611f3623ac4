// The topics page's live view (pure: no browser state, unit-tested): the last messages of a
// topic, bounded, merged from polls of the history route.

export interface Message { topicid: string; time: number; payload: string; userid: string; qos: number }

/** How many messages the live view keeps. */
export const LIVE_MAX = 100;

/** The live view after a poll: `fresh` holds every message from second `since` on (the history's
 *  times are whole seconds), so those of `held` from that second are replaced, not repeated.
 *  Newest first, at most `max`. */
export function mergeLive(held: Message[], fresh: Message[], since: number | null, max = LIVE_MAX): Message[] {
  const kept = since === null ? [] : held.filter((m) => m.time < since);
  return [...fresh, ...kept].sort((a, b) => b.time - a.time).slice(0, max);
}
