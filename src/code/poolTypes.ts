// The worker pool's shapes (pool.ts): what the engine hands it, how many workers it asks for, and
// how it keeps runs, systems, batches and workers.
import type { MessagePort } from "node:worker_threads";
import type { LruMap } from "../core/cache.ts";
import type { Logger } from "../core/log.ts";
import type { Counter } from "../core/metrics.ts";
import type { PostedSet } from "../domain/cacheVersions.ts";
import type { AnswerStep, Step } from "./protocol.ts";
import type { RunOutcome, SandboxSource } from "./sandbox.ts";

/** the least heap a worker is given (its module starts at 16 MiB) */
export const MIN_SHARE_BYTES = 32 << 20;
/** (a multiplication: `n << 20` overflows past 2 GB) */
export const MB = 1 << 20;

/** Workers when --code-workers is not set: twice the cores, since a worker blocked in a classic
 *  call (it waits for the main thread's answer) leaves its core idle, but never so many that a
 *  worker's share of `memoryMb` falls below one sandbox's limit; never fewer than the cores (at
 *  least 2). On 2 cores (256 MB, 64 MB sandboxes): 4, and a service's blocking collection fetch
 *  went from 0.54-0.63 of the same fetch through ClearBladeAsync to 0.89-1.20. */
export function defaultWorkers(cores: number, memoryMb: number, sandboxMemoryMb: number): number {
  const fitting = Math.floor((memoryMb * MB) / Math.max(MIN_SHARE_BYTES, sandboxMemoryMb * MB));
  return Math.max(2, cores, Math.min(2 * cores, fitting));
}

export interface PoolOptions {
  workers: number;
  /** the heaps of all workers together */
  memoryMb: number;
  /** one sandbox's limit */
  sandboxMemoryMb: number;
  sliceMs: number;
  /** the share of the workers one system may hold at once (0..1] */
  maxShare: number;
  /** runs of one system waiting for a worker */
  queueMax: number;
  /** the workers' nice value above the process's (InitMessage.nice; none: 0) */
  nice?: number;
  /** warm sandboxes kept over all workers (WARM_MAX unless given) */
  warmMax?: number;
  log: Logger;
  /** counts workers replaced, by reason */
  restarts?: Counter;
  /** the service caches' versions, handed to every worker (see InitMessage.cacheVersions) */
  cacheVersions?: SharedArrayBuffer;
  /** where the cache sets workers made themselves go (with cacheVersions) */
  cacheWrites?: (m: PostedSet) => void;
}

/** One run, as the engine hands it over. */
export interface RunSpec {
  system: string;
  /** systemKey/name */
  key: string;
  /** the version of the service's code and libraries: a worker with another rebuilds */
  version: string;
  source: SandboxSource;
  entry: string;
  /** the caller's part of req as JSON */
  context: string;
  params: string | null;
  /** 0: none (a stream service) */
  timeoutMs: number;
  logs: boolean;
  /** the run's instance id (req.service_instance_id, and how it is listed and stopped) */
  instanceId: string;
  /** a runtime-API call of the run, answered as {ok, data} / {ok, error} JSON text */
  host(op: string, argsJson: string): Promise<string>;
  /** whose rights on caches the run has, when its worker may remember them across runs */
  cacheRights?: string;
}

export type PoolOutcome = RunOutcome & { logs?: string[]; /** its worker had to be terminated */ killed?: boolean };

export interface Run {
  id: number;
  spec: RunSpec;
  sys: Sys;
  /** epoch ms, 0: none */
  deadline: number;
  slot: Slot | null;
  over: boolean;
  /** why it was stopped, while its worker has not ended it: a worker that blocks in calls without
   *  going back to its messages learns it at its next call */
  stopping?: string;
  resolve(o: PoolOutcome): void;
}

export interface Sys {
  key: string;
  queue: Run[];
  /** answers to host calls, by the worker holding their run */
  answers: Map<Slot, AnswerStep[]>;
  /** workers running a batch of this system now */
  holding: number;
  /** when it was last given a worker (a counter) */
  served: number;
  /** how long its batches take, ms (a moving average): it may borrow workers past its share while
   *  this stays under BORROW_MAX_MS */
  batchMs: number;
  /** runs behind another in its batches under way (counted with its queue against its bound) */
  behind: number;
}

export interface Batch {
  sys: Sys; steps: Step[]; runs: (Run | undefined)[]; /** performance.now() at send */ at: number;
  /** its runs after the first (they wait behind it, as queued runs do) */
  behind: number;
}

export interface Slot {
  worker: Worker;
  ready: boolean;
  batch: Batch | null;
  ended: boolean;
  /** runs started on it and not over */
  runs: Map<number, Run>;
  /** sources it holds: key -> version, least recently used first */
  sources: LruMap<string, string>;
  heap: number;
  warm: number;
  /** see InitMessage.watch */
  deadline: Float64Array;
  current: Int32Array;
  /** set while code of other systems waits for this worker (see sandbox.ts: past its slice, the
   *  stretch running now is then stopped) */
  contended: Int32Array;
  /** answers to its blocking calls (see callBuffer.ts) */
  calls: SharedArrayBuffer;
  large: MessagePort;
  /** the blocking call it waits on now (0: none), and its run */
  blocked: number;
  blockedRun: number;
}

/** The refusals of runs because their system's queue is full (a trigger's run waits for room
 *  then, see triggers/backlog.ts): told apart from every other THROTTLED by identity. */
const queueFullErrors = new WeakSet<object>();
export function queueFull<E extends Error>(e: E): E { queueFullErrors.add(e); return e; }
export const isQueueFull = (e: unknown): boolean => typeof e === "object" && e !== null && queueFullErrors.has(e);
