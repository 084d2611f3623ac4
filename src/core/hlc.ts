// A hybrid logical clock: wall time in ms, a counter for events within the same ms, and the node
// id as the tie-break. Stamps compare as plain strings, so SQL and JS agree on their order.
// Used for last-writer-wins on rows that both an edge and its platform may write.
//
// The clock never goes backwards: it takes the maximum of the physical clock and of every stamp it
// has seen, and its state is saved (see ChangeRecorder) so a restart does not lose it. A stamp
// from another node more than `maxSkewMs` ahead of the physical clock is refused (observe returns
// false): one node with a clock far in the future would otherwise drag every clock along with it.
export class Hlc {
  private wall = 0;
  private counter = 0;
  constructor(readonly node: string, private readonly clock: () => number = Date.now, readonly maxSkewMs = Infinity) {}

  /** A stamp for a local event, later than every stamp seen so far. */
  now(): string {
    const t = this.clock();
    if (t > this.wall) { this.wall = t; this.counter = 0; }
    else this.tick();
    return format(this.wall, this.counter, this.node);
  }

  /** The latest stamp issued or seen (without issuing one), for saving the clock's state. */
  last(): string { return format(this.wall, this.counter, this.node); }

  /** Takes a stamp seen from another node into account, so later local stamps sort after it.
   *  False (and nothing taken) when the stamp is further ahead of this node's physical clock than
   *  the accepted skew. */
  observe(stamp: string | null | undefined): boolean {
    if (!stamp) return true;
    const p = parse(stamp);
    if (!p) return true;
    if (p.wall - this.clock() > this.maxSkewMs) return false;
    this.take(p.wall, p.counter);
    return true;
  }

  /** Takes a stamp this node issued or stored itself (its saved state, stored rows): never refused. */
  restore(stamp: string | null | undefined) {
    const p = stamp ? parse(stamp) : null;
    if (p) this.take(p.wall, p.counter);
  }

  /** How far (ms) a stamp is ahead of this node's physical clock (negative: behind). */
  aheadBy(stamp: string): number {
    const p = parse(stamp);
    return p ? p.wall - this.clock() : 0;
  }

  private take(wall: number, counter: number) {
    if (wall > this.wall) { this.wall = wall; this.counter = counter; }
    else if (wall === this.wall && counter > this.counter) this.counter = counter;
  }

  /** The counter has six digits: past them the wall moves on by one ms (stamps keep their order). */
  private tick() {
    if (this.counter < MAX_COUNTER) this.counter++;
    else { this.wall++; this.counter = 0; }
  }
}

const MAX_COUNTER = 999_999;

const format = (wall: number, counter: number, node: string) =>
  `${wall.toString().padStart(15, "0")}-${counter.toString().padStart(6, "0")}-${node}`;

export function parse(stamp: string): { wall: number; counter: number; node: string } | null {
  const m = /^(\d{15})-(\d{6})-(.*)$/.exec(stamp);
  return m ? { wall: Number(m[1]), counter: Number(m[2]), node: m[3]! } : null;
}

/** The smallest stamp of `node` later than `stamp` (a local write over a row stored with a stamp
 *  the clock is behind of). */
export function after(stamp: string, node: string): string {
  const p = parse(stamp);
  if (!p) return stamp;
  return p.counter < MAX_COUNTER ? format(p.wall, p.counter + 1, node) : format(p.wall + 1, 0, node);
}

/** Whether stamp `a` is later than `b` (a missing stamp is the earliest). */
export const later = (a: string | null | undefined, b: string | null | undefined) => (a ?? "") > (b ?? "");
