// Trigger runs wait here while their system's code queue is full (--code-queue), rather than being
// refused: a burst of publishes on a trigger's topic runs every handler, later (an HTTP caller is
// told 429 instead, and retries itself). Runs wait in the order their events came, and go to the
// code engine as its queue has room. A system's backlog is bounded: a run past it, and every run
// still waiting when the node stops, is recorded as a failed run, which /codeadmin/failed lists and
// retries: none is lost without a trace.
import type { Logger } from "../core/log.ts";

/** A trigger's run: `run` refuses with a queue-full error (BacklogDeps.isQueueFull) when the
 *  system's queue has no room; `drop` records it as a failed run that never ran. */
export interface TriggerJob { trigger: string; run(): Promise<unknown>; drop(why: string): Promise<void> }

export interface BacklogDeps {
  /** runs of the system the code engine takes now */
  room(systemKey: string): number;
  isQueueFull(err: unknown): boolean;
  log: Logger;
}

/** Trigger runs one system may have waiting here. */
export const BACKLOG_MAX = 100_000;
/** How soon runs waiting are offered to the engine again. */
const RETRY_MS = 10;

/** One system's runs waiting, in the order their events came (by `seq`), and its runs started and
 *  not ended: they count against the queue's room, which counts only the runs it holds. */
class Line {
  private items: { seq: number; job: TriggerJob }[] = [];
  private head = 0;
  inFlight = 0;
  get size() { return this.items.length - this.head; }
  /** Puts a run in its place: last when it is new, before later ones when it was refused. */
  put(seq: number, job: TriggerJob) {
    let lo = this.head, hi = this.items.length;
    if (hi === lo || this.items[hi - 1]!.seq < seq) { this.items.push({ seq, job }); return; }
    while (lo < hi) { const mid = (lo + hi) >> 1; if (this.items[mid]!.seq < seq) lo = mid + 1; else hi = mid; }
    if (lo === this.head && this.head > 0) this.items[--this.head] = { seq, job };
    else this.items.splice(lo, 0, { seq, job });
  }
  take(): { seq: number; job: TriggerJob } | undefined {
    if (this.head >= this.items.length) return undefined;
    const x = this.items[this.head]!;
    this.items[this.head++] = undefined as never;
    if (this.head > 1024 && this.head * 2 > this.items.length) { this.items = this.items.slice(this.head); this.head = 0; }
    return x;
  }
}

export class TriggerBacklog {
  private readonly lines = new Map<string, Line>();
  private seq = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private stopped = false;

  constructor(private readonly d: BacklogDeps, private readonly max = BACKLOG_MAX) {}

  /** Runs waiting, over all systems. */
  get size() { let n = 0; for (const l of this.lines.values()) n += l.size; return n; }

  /** Runs the job now, unless runs of its system wait already (it goes after them) or its queue
   *  has no room for it. */
  add(systemKey: string, job: TriggerJob) {
    if (this.stopped) { void this.drop(job, "the node was stopping when its event came"); return; }
    const line = this.lineOf(systemKey), seq = ++this.seq;
    if (line.size > 0 || !this.hasRoom(systemKey, line)) this.hold(systemKey, line, seq, job);
    else this.start(systemKey, line, seq, job);
  }

  /** Records every run still waiting as failed (the node stops: they would be lost). */
  async stop() {
    this.stopped = true;
    if (this.timer) { clearTimeout(this.timer); this.timer = null; }
    const all: Promise<void>[] = [];
    for (const line of this.lines.values()) for (let w = line.take(); w; w = line.take()) all.push(this.drop(w.job, "the node stopped before it ran"));
    await Promise.all(all);
  }

  private lineOf(systemKey: string): Line {
    let line = this.lines.get(systemKey);
    if (!line) this.lines.set(systemKey, (line = new Line()));
    return line;
  }

  /** Room in the system's queue beyond the runs started here and not ended (those not queued yet
   *  among them would take it). */
  private hasRoom(systemKey: string, line: Line) { return this.d.room(systemKey) - line.inFlight > 0; }

  private start(systemKey: string, line: Line, seq: number, job: TriggerJob) {
    line.inFlight++;
    job.run().then(() => { line.inFlight--; this.ended(systemKey, line); }, (err) => {
      line.inFlight--;
      // refused: others took the room between the look and the run; it keeps its place
      if (this.d.isQueueFull(err) && !this.stopped) this.hold(systemKey, line, seq, job);
      else if (this.d.isQueueFull(err)) void this.drop(job, "the node stopped before it ran");
      else { this.d.log.warn("trigger run failed", { trigger: job.trigger, err }); this.ended(systemKey, line); }
    });
  }

  /** A run ended: a line with nothing waiting or running goes. */
  private ended(systemKey: string, line: Line) {
    if (line.size === 0 && line.inFlight === 0 && this.lines.get(systemKey) === line) this.lines.delete(systemKey);
  }

  private hold(systemKey: string, line: Line, seq: number, job: TriggerJob) {
    if (line.size >= this.max) {
      void this.drop(job, `${this.max} runs of this system's triggers were waiting for room in its code queue (--code-queue)`);
      return;
    }
    line.put(seq, job);
    this.timer ??= setTimeout(() => this.pump(), RETRY_MS);
  }

  /** Offers each system's waiting runs to the engine, as many as its queue has room for. */
  private pump() {
    this.timer = null;
    let waiting = false;
    for (const [systemKey, line] of this.lines) {
      while (line.size > 0 && this.hasRoom(systemKey, line)) { const w = line.take()!; this.start(systemKey, line, w.seq, w.job); }
      if (line.size > 0) waiting = true;
    }
    if (waiting) this.timer = setTimeout(() => this.pump(), RETRY_MS);
  }

  private drop(job: TriggerJob, why: string): Promise<void> {
    this.d.log.warn("trigger run not run: recorded as a failed run", { trigger: job.trigger, why });
    return job.drop(`not run: ${why}`).catch((err) => this.d.log.error("could not record a trigger run that did not run", { trigger: job.trigger, err }));
  }
}
