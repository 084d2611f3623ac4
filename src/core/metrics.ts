// Prometheus text exposition (`GET /metrics`): counters with labels and histograms, kept in
// memory by the process. Small on purpose: only what the server itself reports.

type Labels = Record<string, string>;
const labelText = (l: Labels) => {
  const parts = Object.entries(l).map(([k, v]) => `${k}="${v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`);
  return parts.length ? `{${parts.join(",")}}` : "";
};

export class Counter {
  private readonly values = new Map<string, { labels: Labels; n: number }>();
  constructor(readonly name: string, readonly help: string) {}
  inc(labels: Labels = {}, by = 1) {
    const k = labelText(labels);
    const v = this.values.get(k);
    if (v) v.n += by;
    else this.values.set(k, { labels, n: by });
  }
  get(labels: Labels = {}) { return this.values.get(labelText(labels))?.n ?? 0; }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    for (const [k, v] of this.values) lines.push(`${this.name}${k} ${v.n}`);
    return lines.join("\n");
  }
}

export class Histogram {
  private readonly counts: number[];
  private sum = 0;
  private total = 0;
  /** bounds in the unit of the metric (seconds for durations) */
  constructor(readonly name: string, readonly help: string, private readonly bounds: number[]) {
    this.counts = bounds.map(() => 0);
  }
  observe(v: number) {
    this.sum += v;
    this.total++;
    for (let i = 0; i < this.bounds.length; i++) if (v <= this.bounds[i]!) { this.counts[i]!++; break; }
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    let cumulative = 0;
    this.bounds.forEach((b, i) => { cumulative += this.counts[i]!; lines.push(`${this.name}_bucket{le="${b}"} ${cumulative}`); });
    lines.push(`${this.name}_bucket{le="+Inf"} ${this.total}`, `${this.name}_sum ${this.sum}`, `${this.name}_count ${this.total}`);
    return lines.join("\n");
  }
}

/** A histogram per label set (one series family). */
export class LabeledHistogram {
  private readonly series = new Map<string, { labels: string; counts: number[]; sum: number; total: number }>();
  constructor(readonly name: string, readonly help: string, private readonly bounds: number[]) {}
  observe(labels: Labels, v: number) {
    const k = labelText(labels);
    let s = this.series.get(k);
    if (!s) this.series.set(k, (s = { labels: k.slice(1, -1), counts: this.bounds.map(() => 0), sum: 0, total: 0 }));
    s.sum += v;
    s.total++;
    for (let i = 0; i < this.bounds.length; i++) if (v <= this.bounds[i]!) { s.counts[i]!++; break; }
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const s of this.series.values()) {
      const l = s.labels ? `${s.labels},` : "";
      let cumulative = 0;
      this.bounds.forEach((b, i) => { cumulative += s.counts[i]!; lines.push(`${this.name}_bucket{${l}le="${b}"} ${cumulative}`); });
      lines.push(`${this.name}_bucket{${l}le="+Inf"} ${s.total}`, `${this.name}_sum${s.labels ? `{${s.labels}}` : ""} ${s.sum}`, `${this.name}_count${s.labels ? `{${s.labels}}` : ""} ${s.total}`);
    }
    return lines.join("\n");
  }
}

type Reading = [Labels, number][];

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
  private readonly all: { render(): string | Promise<string> }[] = [];
  counter(name: string, help: string) { const c = new Counter(name, help); this.all.push(c); return c; }
  histogram(name: string, help: string, bounds: number[]) { const h = new Histogram(name, help, bounds); this.all.push(h); return h; }
  labeledHistogram(name: string, help: string, bounds: number[]) { const h = new LabeledHistogram(name, help, bounds); this.all.push(h); return h; }
  gauge(name: string, help: string, read: () => Reading | Promise<Reading>) { const g = new Gauge(name, help, read); this.all.push(g); return g; }
  /** a counter its owner keeps (a number incremented on a hot path), read when asked */
  readCounter(name: string, help: string, read: () => Reading) { const g = new Gauge(name, help, read, "counter"); this.all.push(g); return g; }
  async render(): Promise<string> { return (await Promise.all(this.all.map((m) => m.render()))).join("\n") + "\n"; }
}
