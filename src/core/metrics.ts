// Prometheus text exposition (`GET /metrics`): counters with labels and histograms, kept in
// memory by the process. Small on purpose: only what the server itself reports.

type Labels = Record<string, string>;
const escapeValue = (v: string) => (/[\\"\n]/.test(v) ? v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n") : v);
const labelText = (l: Labels) => {
  let out = "";
  for (const k in l) out += `${out ? "," : "{"}${k}="${escapeValue(l[k]!)}"`;
  return out ? `${out}}` : "";
};

/** One labelled series of a counter: a hot path keeps it and counts on it without building the
 *  series' key each time. */
export interface CounterSeries { n: number }

export class Counter {
  private readonly values = new Map<string, CounterSeries>();
  constructor(readonly name: string, readonly help: string) {}
  series(labels: Labels = {}): CounterSeries {
    const k = labelText(labels);
    let v = this.values.get(k);
    if (!v) this.values.set(k, (v = { n: 0 }));
    return v;
  }
  inc(labels: Labels = {}, by = 1) { this.series(labels).n += by; }
  get(labels: Labels = {}) { return this.values.get(labelText(labels))?.n ?? 0; }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    for (const [k, v] of this.values) lines.push(`${this.name}${k} ${v.n}`);
    return lines.join("\n");
  }
}

/** The buckets of one histogram series; `labels`: its label text without braces. */
export class HistogramSeries {
  readonly counts: number[];
  sum = 0;
  total = 0;
  constructor(readonly labels: string, private readonly bounds: number[]) { this.counts = bounds.map(() => 0); }
  observe(v: number) {
    this.sum += v;
    this.total++;
    for (let i = 0; i < this.bounds.length; i++) if (v <= this.bounds[i]!) { this.counts[i]!++; break; }
  }
  render(name: string, lines: string[]) {
    const l = this.labels ? `${this.labels},` : "";
    const own = this.labels ? `{${this.labels}}` : "";
    let cumulative = 0;
    this.bounds.forEach((b, i) => { cumulative += this.counts[i]!; lines.push(`${name}_bucket{${l}le="${b}"} ${cumulative}`); });
    lines.push(`${name}_bucket{${l}le="+Inf"} ${this.total}`, `${name}_sum${own} ${this.sum}`, `${name}_count${own} ${this.total}`);
  }
}

export class Histogram {
  private readonly only: HistogramSeries;
  /** bounds in the unit of the metric (seconds for durations) */
  constructor(readonly name: string, readonly help: string, bounds: number[]) { this.only = new HistogramSeries("", bounds); }
  observe(v: number) { this.only.observe(v); }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    this.only.render(this.name, lines);
    return lines.join("\n");
  }
}

/** A histogram per label set (one series family). */
export class LabeledHistogram {
  private readonly all = new Map<string, HistogramSeries>();
  constructor(readonly name: string, readonly help: string, private readonly bounds: number[]) {}
  series(labels: Labels): HistogramSeries {
    const k = labelText(labels);
    let s = this.all.get(k);
    if (!s) this.all.set(k, (s = new HistogramSeries(k.slice(1, -1), this.bounds)));
    return s;
  }
  observe(labels: Labels, v: number) { this.series(labels).observe(v); }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const s of this.all.values()) s.render(this.name, lines);
    return lines.join("\n");
  }
}

type Reading = [Labels, number][];

/** The label value of everything an open-ended label leaves out. */
export const OTHER = "other";
/** Keys waiting for a place, counted between two readings of /metrics, at most. */
const WAITING_MAX = 10_000;

/** Label values from an open-ended set (system keys, services), kept to a bound: at most `max`
 *  keys get series of their own, the others count as "other". Places go, when /metrics is read,
 *  to the keys counted most since the last reading, and are kept for the life of the process: a
 *  key moved back into "other" would make its counter and "other" go down, which Prometheus
 *  reads as a restart. A key counts into "other" until it has a place. */
export class TopLabels {
  private readonly placed = new Set<string>();
  private readonly waiting = new Map<string, number>();
  constructor(readonly max: number) {}

  /** The label value of `key`: itself once it has a place, else "other". Only an `eligible` key
   *  is considered for a place (a system key a request named but nothing showed to exist is not). */
  of(key: string, eligible = true): string {
    if (this.placed.has(key)) return key;
    if (eligible && this.placed.size < this.max) {
      const n = this.waiting.get(key);
      if (n !== undefined) this.waiting.set(key, n + 1);
      else if (this.waiting.size < WAITING_MAX) this.waiting.set(key, 1);
    }
    return OTHER;
  }

  /** Gives the free places to the keys counted most since the last call. */
  promote() {
    const free = this.max - this.placed.size;
    if (free > 0 && this.waiting.size > 0)
      for (const [k] of [...this.waiting].sort((a, b) => b[1] - a[1]).slice(0, free)) this.placed.add(k);
    this.waiting.clear();
  }
}

/** The `max` largest readings of a gauge, the rest summed into one with `rest` as its labels
 *  (none: dropped). For gauges only: a counter needs TopLabels' stable places. */
export function largest(readings: Reading, max: number, rest?: Labels): Reading {
  if (readings.length <= max) return readings;
  const sorted = [...readings].sort((a, b) => b[1] - a[1]);
  const out = sorted.slice(0, max);
  if (rest) out.push([rest, sorted.slice(max).reduce((n, r) => n + r[1], 0)]);
  return out;
}

/** A value read when /metrics is asked (connections, queue sizes, file sizes): nothing on a hot
 *  path. Also a counter kept elsewhere as a plain number (the broker's messages). */
export class Gauge {
  constructor(readonly name: string, readonly help: string, private readonly read: () => Reading | Promise<Reading>, private readonly type: "gauge" | "counter" = "gauge") {}
  async render(): Promise<string> {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} ${this.type}`];
    try { for (const [l, v] of await this.read()) lines.push(`${this.name}${labelText(l)} ${v}`); } catch { /* a part that is stopping: no value */ }
    return lines.join("\n");
  }
}

export class Metrics {
  private readonly all: { name: string; render(): string | Promise<string> }[] = [];
  private readonly bounded: TopLabels[] = [];
  /** label values kept to `max` keys, their places given out as /metrics is read */
  topLabels(max: number) { const t = new TopLabels(max); this.bounded.push(t); return t; }
  counter(name: string, help: string) { const c = new Counter(name, help); this.all.push(c); return c; }
  histogram(name: string, help: string, bounds: number[]) { const h = new Histogram(name, help, bounds); this.all.push(h); return h; }
  labeledHistogram(name: string, help: string, bounds: number[]) { const h = new LabeledHistogram(name, help, bounds); this.all.push(h); return h; }
  gauge(name: string, help: string, read: () => Reading | Promise<Reading>) { const g = new Gauge(name, help, read); this.all.push(g); return g; }
  /** a counter its owner keeps (a number incremented on a hot path), read when asked */
  readCounter(name: string, help: string, read: () => Reading) { const g = new Gauge(name, help, read, "counter"); this.all.push(g); return g; }
  async render(): Promise<string> {
    for (const t of this.bounded) t.promote();
    return (await Promise.all(this.all.map((m) => m.render()))).join("\n") + "\n";
  }
  /** The metric names this registry exposes (the dashboard's and the alerts' test checks them). */
  names(): string[] { return this.all.map((m) => m.name); }
}
