// A hybrid logical clock: wall time in ms, a counter for events within the same ms, and the node
// id as the tie-break. Stamps compare as plain strings, so SQL and JS agree on their order.
// Used for last-writer-wins on rows that both an edge and its platform may write.
export class Hlc {
  private wall = 0;
  private counter = 0;
  constructor(readonly node: string, private readonly clock: () => number = Date.now) {}

  /** A stamp for a local event, later than every stamp seen so far. */
  now(): string {
    const t = this.clock();
    if (t > this.wall) { this.wall = t; this.counter = 0; }
    else this.counter++;
    return format(this.wall, this.counter, this.node);
  }

  /** Takes a stamp seen from another node into account, so later local stamps sort after it. */
  observe(stamp: string | null | undefined) {
    if (!stamp) return;
    const p = parse(stamp);
    if (!p) return;
    if (p.wall > this.wall) { this.wall = p.wall; this.counter = p.counter; }
    else if (p.wall === this.wall && p.counter > this.counter) this.counter = p.counter;
  }
}

const format = (wall: number, counter: number, node: string) =>
  `${wall.toString().padStart(15, "0")}-${counter.toString().padStart(6, "0")}-${node}`;

export function parse(stamp: string): { wall: number; counter: number; node: string } | null {
  const m = /^(\d{15})-(\d{6})-(.*)$/.exec(stamp);
  return m ? { wall: Number(m[1]), counter: Number(m[2]), node: m[3]! } : null;
}

/** Whether stamp `a` is later than `b` (a missing stamp is the earliest). */
export const later = (a: string | null | undefined, b: string | null | undefined) => (a ?? "") > (b ?? "");
