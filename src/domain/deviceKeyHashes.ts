// The argon2id hashes of chosen device keys, computed after the request that set them (see
// auth/deviceKeys.ts): a bulk creation of 2,000 devices answers in about two seconds instead of a
// minute and a half. The jobs are rows (store/deviceKeyJobs.ts) written in the transaction that
// stores the device, so a crash loses none: the next start picks them up. One hash at a time, on
// Bun's hashing threads (never the event loop), so a backlog takes one core and leaves the other
// to requests. Until its hash lands a device signs in with its verifier; a job whose device was
// given another key or deleted meanwhile only goes away.
import type { Executor } from "../store/db.ts";
import { deviceKeyJobsRepo, type DeviceKeyJobRow } from "../store/deviceKeyJobs.ts";
import { devicesRepo } from "../store/devices.ts";
import type { DeviceKeys } from "../auth/deviceKeys.ts";
import type { DomainDeps } from "./deps.ts";

/** Jobs read per query. */
const BATCH = 50;
/** After a failure to write, the next attempt (jobs stay in the table meanwhile). */
const RETRY_MS = 30_000;
/** How long a stop keeps hashing: a small backlog is finished, a large one waits for the next start. */
const STOP_GRACE_MS = 3_000;

export class DeviceKeyHashes {
  private draining: Promise<void> | null = null;
  private again = false;
  private stopped = true;
  private stopBy = 0;
  private retry: ReturnType<typeof setTimeout> | null = null;
  /** hashes put in place since start */
  settled = 0;

  /** `settledDevice`: called in the transaction that replaced a device's stand-in (edge sync logs it). */
  constructor(private readonly d: DomainDeps, private readonly keys: DeviceKeys,
    private readonly settledDevice: (tx: Executor, systemKey: string, name: string) => Promise<void>) {}

  /** Starts working through the jobs left by a previous run, and the ones to come. */
  start() {
    this.stopped = false;
    this.wake();
  }

  /** Finishes the jobs it can within a short grace; the rest wait in the table for the next start
   *  (which needs the same secret key to open them). */
  async stop() {
    this.stopBy = Date.now() + STOP_GRACE_MS;
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
    await this.draining;
  }

  /** Jobs waiting (the gauge on /metrics). */
  waiting(): Promise<number> {
    return deviceKeyJobsRepo.count(this.d.db);
  }

  /** New jobs were committed. */
  wake() {
    if (this.stopped) return;
    if (this.draining) { this.again = true; return; }
    this.draining = this.drain().finally(() => {
      this.draining = null;
      if (this.again) { this.again = false; this.wake(); }
    });
  }

  private async drain() {
    try {
      for (;;) {
        const jobs = await deviceKeyJobsRepo.oldest(this.d.db, BATCH);
        if (!jobs.length) return;
        for (const job of jobs) {
          if (this.stopped && Date.now() > this.stopBy) return;
          await this.settle(job);
        }
      }
    } catch (err) {
      this.d.log.warn("device key hashing failed, retrying later", { err });
      if (!this.stopped) { this.retry = setTimeout(() => { this.retry = null; this.wake(); }, RETRY_MS); this.retry.unref?.(); }
    }
  }

  private async settle(job: DeviceKeyJobRow) {
    let made: { hash: string; verifier: string };
    try { made = await this.keys.settle(job.sealed_key); } catch {
      // sealed under another secret key: nobody can hash it here (its verifier does not check either)
      this.d.log.warn("a chosen device key cannot be opened with this node's secret key; the device needs a new key", { systemKey: job.system_key, device: job.name });
      await deviceKeyJobsRepo.remove(this.d.db, job.pending_hash);
      return;
    }
    await this.d.db.tx(async (tx) => {
      const dev = await devicesRepo.byName(tx, job.system_key, job.name);
      if (dev?.active_key_hash === job.pending_hash) {
        const verifiers = [...this.keys.keep(JSON.parse(dev.key_hashes) as string[], JSON.parse(dev.key_verifiers) as string[]), made.verifier];
        if (await devicesRepo.replaceKeyHash(tx, job.system_key, job.name, job.pending_hash, made.hash, JSON.stringify(verifiers))) {
          await this.settledDevice(tx, job.system_key, job.name);
          this.settled++;
        }
      }
      await deviceKeyJobsRepo.remove(tx, job.pending_hash);
    });
  }
}
