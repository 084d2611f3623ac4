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

export class Metrics {
  private readonly all: (Counter | Histogram)[] = [];
  counter(name: string, help: string) { const c = new Counter(name, help); this.all.push(c); return c; }
  histogram(name: string, help: string, bounds: number[]) { const h = new Histogram(name, help, bounds); this.all.push(h); return h; }
  render(): string { return this.all.map((m) => m.render()).join("\n") + "\n"; }
}
