// What a hello reads, kept in memory so that a herd of hellos (thousands of edges coming back
// after a restart) reads the database once, not five times per edge: the edge records (all of
// them read at the hub's start), each edge's template, each system with its owner, and the
// bounds of each system's log. Each is dropped when what it comes from changes: the signals
// (shared by a cluster's nodes) for records, templates, systems and developers; a commit or a
// compaction for the log's bounds; the named template file's time and size for a template.
// What another node writes sends no signal (an edge's applied template, the log's compaction),
// so in a cluster edge records and log bounds are read for each hello: those asked in one turn of
// the loop (a herd's admitted slice) in one read after it, which begins after each of them arrived.
import type { TemplateEntry } from "../../domain/edges.ts";
import type { DeveloperRow } from "../../store/developers.ts";
import { developersRepo } from "../../store/developers.ts";
import { type EdgeRow, edgesRepo } from "../../store/edges.ts";
import { changesRepo } from "../../store/sync.ts";
import { type SystemRow, systemsRepo } from "../../store/systems.ts";
import type { HubDeps } from "./types.ts";

/** The log's last position and what compaction dropped up to (its horizon). */
export interface LogBounds { maxSeq: number; horizon: number }

export class HelloReads {
  private readonly edges = new Map<string, EdgeRow>();
  private readonly templates = new Map<string, { entries: TemplateEntry[]; stamp: string }>();
  private readonly systems = new Map<string, Promise<{ system: SystemRow; owner: DeveloperRow } | null>>();
  private readonly bounds = new Map<string, Promise<LogBounds>>();

  constructor(private readonly d: HubDeps) {
    d.signals.on("edge.changed", ({ systemKey, edge }) => this.forgetEdge(systemKey, edge));
    d.signals.on("system.changed", ({ systemKey }) => { this.systems.delete(systemKey); });
    d.signals.on("system.removed", ({ systemKey }) => {
      this.forgotten++;
      this.systems.delete(systemKey);
      this.bounds.delete(systemKey);
      this.filled.delete(systemKey);
      for (const k of [...this.edges.keys(), ...this.templates.keys()]) if (k.startsWith(`${systemKey}/`)) { this.edges.delete(k); this.templates.delete(k); }
    });
    // an owner's profile goes to its edges with each welcome
    d.signals.on("tokens.subjectChanged", ({ kind }) => { if (kind === "developer") this.systems.clear(); });
  }

  private get clustered() { return this.d.elsewhere.get() !== null; }

  /** Keeps a system's edge records as read at once (the hub's start; a cluster, known only
   *  later, does not use them). */
  keepEdges(rows: EdgeRow[]) { for (const e of rows) this.edges.set(`${e.system_key}/${e.name}`, e); }

  async edge(sk: string, name: string): Promise<EdgeRow | undefined> {
    if (this.clustered) { this.edges.clear(); return (await this.ofTurn(this.edgeReads, sk, name, (names) => edgesRepo.some(this.d.db, sk, names)
      .then((rows) => new Map(rows.map((e) => [e.name, e]))))).get(name); }
    const k = `${sk}/${name}`;
    const known = this.edges.get(k);
    if (known) return known;
    const e = await edgesRepo.get(this.d.db, sk, name);
    if (e) this.edges.set(k, e);
    return e;
  }

  /** The hub wrote the edge's record (its first contact): read again. */
  forgetRecord(sk: string, name: string) { this.edges.delete(`${sk}/${name}`); }

  /** The edge applied a snapshot (written with the next batch of the hub's writes): the record
   *  kept says so now (a copy: sessions may hold the one kept before). */
  snapshotDone(sk: string, name: string, incarnation: string, template: string | null, cursor: number | null) {
    const k = `${sk}/${name}`, e = this.edges.get(k);
    if (!e || e.incarnation !== incarnation) return;
    this.edges.set(k, { ...e, ...(template !== null ? { applied_template: template } : {}), ...(cursor !== null ? { cursor } : {}) });
  }

  /** The edge's record or template changed (or it went): both read again at its next hello. */
  forgetEdge(sk: string, name: string) { this.forgotten++; this.edges.delete(`${sk}/${name}`); this.templates.delete(`${sk}/${name}`); }

  /** Named templates' files' stamps taken in this turn of the loop: the slice of a herd's hellos
   *  admitted in one turn takes each once (a stat per hello was 10-15 µs of each). */
  private turnStamps: Map<string, string> | null = null;

  /** What the edge gets (Edges.templateOf), read again when its named template's file changed.
   *  `stamps`: the files' stamps already taken, by template name (a fleet's edges share a few);
   *  by default those of this turn. */
  async template(edge: EdgeRow, stamps = this.stampsOfTurn()): Promise<TemplateEntry[]> {
    const k = `${edge.system_key}/${edge.name}`;
    let file = stamps.get(edge.template);
    if (file === undefined) { file = this.d.edges.namedTemplateStamp(edge.template); stamps.set(edge.template, file); }
    const stamp = `${edge.template}\u0000${file}`;
    let known = this.templates.get(k);
    if (known && known.stamp === stamp) return known.entries;
    // the first miss of a system after the start: every edge's template, from shared reads
    if (!known && !this.clustered && !this.filled.has(edge.system_key)) {
      await this.fill(edge.system_key);
      known = this.templates.get(k);
      if (known && known.stamp === stamp) return known.entries;
    }
    const entries = await this.d.edges.templateOf(this.d.db, edge.system_key, edge);
    this.templates.set(k, { entries, stamp });
    return entries;
  }

  private stampsOfTurn(): Map<string, string> {
    if (!this.turnStamps) { this.turnStamps = new Map(); setImmediate(() => { this.turnStamps = null; }); }
    return this.turnStamps;
  }

  /** systems whose edges' templates were all made at once (or are being: the promise) */
  private readonly filled = new Map<string, Promise<void>>();
  /** counts what was forgotten: templates made while something was are not kept */
  private forgotten = 0;

  private fill(sk: string): Promise<void> {
    let p = this.filled.get(sk);
    if (!p) {
      const rows = [...this.edges.values()].filter((e) => e.system_key === sk), before = this.forgotten;
      this.filled.set(sk, p = (async () => {
        const all = await this.d.edges.templatesOf(this.d.db, sk, rows);
        if (this.forgotten !== before) return;
        const stamps = new Map<string, string>();
        for (const e of rows) {
          let file = stamps.get(e.template);
          if (file === undefined) stamps.set(e.template, file = this.d.edges.namedTemplateStamp(e.template));
          this.templates.set(`${sk}/${e.name}`, { entries: all.get(e.name)!, stamp: `${e.template}\u0000${file}` });
        }
      })().catch((err) => this.d.log.warn("reading the edges' templates failed", { systemKey: sk, err })));
    }
    return p;
  }

  /** The system and its owner (null: either is gone), one read shared by a herd's hellos. */
  systemAndOwner(sk: string): Promise<{ system: SystemRow; owner: DeveloperRow } | null> {
    let p = this.systems.get(sk);
    if (!p) {
      const mine = p = (async () => {
        const system = await systemsRepo.byKey(this.d.db, sk);
        const owner = system && (await developersRepo.byId(this.d.db, system.owner_id));
        return system && owner ? { system, owner } : null;
      })();
      this.systems.set(sk, mine);
      // a failed read, or a system not there yet, is not kept
      mine.then((x) => { if (!x && this.systems.get(sk) === mine) this.systems.delete(sk); }, () => { if (this.systems.get(sk) === mine) this.systems.delete(sk); });
    }
    return p;
  }

  /** The system's log bounds, one read shared until the log moves (a commit, a compaction). */
  logBounds(sk: string): Promise<LogBounds> {
    if (this.clustered) { this.bounds.clear(); return this.ofTurn(this.boundsReads, sk, "", () => this.readBounds(sk)); }
    let p = this.bounds.get(sk);
    if (!p) {
      const mine = p = this.readBounds(sk);
      this.bounds.set(sk, mine);
      mine.catch(() => { if (this.bounds.get(sk) === mine) this.bounds.delete(sk); });
    }
    return p;
  }

  /** In a cluster, the reads asked in this turn of the loop, by system: each begins once the turn
   *  is over, so it is no older than what any of its askers knew (a herd of thousands of hellos
   *  reading one record and the log's bounds each queued past the pool's 10 s connect timeout,
   *  and every hello failed). */
  private readonly edgeReads = new Map<string, { keys: Set<string>; read: Promise<Map<string, EdgeRow>> }>();
  private readonly boundsReads = new Map<string, { keys: Set<string>; read: Promise<LogBounds> }>();
  private ofTurn<T>(reads: Map<string, { keys: Set<string>; read: Promise<T> }>, sk: string, key: string, read: (keys: string[]) => Promise<T>): Promise<T> {
    let r = reads.get(sk);
    if (!r) {
      const keys = new Set<string>();
      // (asked after it began, a read of the next turn)
      reads.set(sk, r = { keys, read: new Promise<T>((resolve, reject) => setImmediate(() => { reads.delete(sk); read([...keys]).then(resolve, reject); })) });
    }
    r.keys.add(key);
    return r.read;
  }

  /** The system's log bounds read now (what must not be a moment late: an edge's lag). */
  freshBounds(sk: string): Promise<LogBounds> { return this.readBounds(sk); }

  private async readBounds(sk: string): Promise<LogBounds> {
    const maxSeq = await changesRepo.maxSeq(this.d.db, sk);
    // compacted by a version that did not record its horizon: the log's first entry says
    const horizon = (await changesRepo.horizon(this.d.db, sk)) ?? Math.max(0, (await changesRepo.minSeq(this.d.db, sk)) - 1);
    return { maxSeq, horizon };
  }

  /** New entries are in the system's log, or old ones went. */
  logMoved(sk: string) { this.bounds.delete(sk); }
}
