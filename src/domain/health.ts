// What /health reports: whether this node can do its work, and if not, why. An orchestrator or a
// gateway's watchdog restarts on a 503, so every reason here is one a restart or an operator can
// act on: the database cannot write, the disk is nearly full, an edge has lost its platform.
import { statfsSync } from "node:fs";
import { dirname } from "node:path";
import type { Db } from "../store/db.ts";
import { settingsRepo } from "../store/settings.ts";

export interface HealthReport {
  status: "ok" | "unhealthy";
  /** why it is unhealthy (one line each) */
  reasons?: string[];
  /** what an operator should know that does not make it unhealthy */
  notes?: string[];
}

export interface HealthOptions {
  db: Db;
  /** the database file, for the free-space check (none for a remote database) */
  dbFile: string | null;
  minFreeMb: number;
  /** edge: the platform link and how long it may be down before the edge is unhealthy */
  link?: { connected(): boolean; lastContactAt(): number; graceS: number; informational: boolean };
}

/** A report is reused this long: a busy probe must not turn into a write per request. */
const REPORT_MS = 1_000;
const DB_TIMEOUT_MS = 2_000;

export class Health {
  /** the newest check started, and the newest one finished */
  private last: { at: number; report: Promise<HealthReport> } | null = null;
  private done: { at: number; report: HealthReport } | null = null;
  private readonly startedAt = Date.now();

  constructor(private readonly o: HealthOptions) {}

  /** The newest report. While a new check runs, the one before it answers: the check's write
   *  waits behind the transactions queued before it (a herd's batched writes: tens of ms), and a
   *  probe must not wait with it. A write that hangs still shows within DB_TIMEOUT_MS + REPORT_MS,
   *  when its check ends. */
  report(now = Date.now()): Promise<HealthReport> {
    if (!this.last || now - this.last.at >= REPORT_MS) {
      const report = this.check(now);
      this.last = { at: now, report };
      // (checks can overlap: a hung write takes DB_TIMEOUT_MS; the one started last wins)
      void report.then((r) => { if (!this.done || this.done.at < now) this.done = { at: now, report: r }; });
    }
    return this.done ? Promise.resolve(this.done.report) : this.last.report;
  }

  private async check(now: number): Promise<HealthReport> {
    const reasons: string[] = [], notes: string[] = [];
    const db = await this.writes();
    if (db) reasons.push(db);
    const disk = this.disk();
    if (disk) reasons.push(disk);
    const link = this.o.link;
    if (link && !link.connected()) {
      const downS = Math.floor((now - (link.lastContactAt() || this.startedAt)) / 1000);
      if (downS > link.graceS) (link.informational ? notes : reasons).push(`the platform link has been down for ${downS} s (grace ${link.graceS} s)`);
    }
    return reasons.length ? { status: "unhealthy", reasons, ...(notes.length ? { notes } : {}) } : { status: "ok", ...(notes.length ? { notes } : {}) };
  }

  /** A write the database must complete within the timeout. */
  private async writes(): Promise<string | null> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      await Promise.race([
        settingsRepo.put(this.o.db, "health_probe", new Date().toISOString()),
        new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`no answer within ${DB_TIMEOUT_MS} ms`)), DB_TIMEOUT_MS); }),
      ]);
      return null;
    } catch (err) {
      return `the database cannot write: ${(err as Error).message}`;
    } finally {
      clearTimeout(timer);
    }
  }

  private disk(): string | null {
    if (!this.o.dbFile) return null;
    try {
      const s = statfsSync(dirname(this.o.dbFile));
      const freeMb = Math.floor((s.bavail * s.bsize) / (1024 * 1024));
      return freeMb < this.o.minFreeMb ? `the disk holding the database has ${freeMb} MB free (less than --min-free-mb ${this.o.minFreeMb})` : null;
    } catch (err) {
      return `the disk holding the database cannot be read: ${(err as Error).message}`;
    }
  }
}
