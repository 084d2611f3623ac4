// What the pool (main thread) and a code worker say to each other. Apart from the first message,
// every message is one JSON string: Bun posts a string without structured cloning, and one
// message carries a whole batch of steps, so a run costs about one post each way however many
// runs share it.
import type { MessagePort } from "node:worker_threads";
import type { PostedSet } from "../domain/cacheVersions.ts";
import type { CompiledQuickJS, RunOutcome, SandboxLimits, SandboxSource } from "./sandbox.ts";

/** main -> worker, once, as an object (it carries the shared watch buffer) */
export interface InitMessage {
  t: "init";
  /** Float64 [0]: deadline of the user code running now (epoch ms, 0: none); Int32 [2]: the run
   *  it belongs to, [3]: its step's index in the batch, [4]: set while code of other systems waits
   *  for this worker */
  watch: SharedArrayBuffer;
  /** where answers to blocking calls are written (callBuffer.ts), and the port for large ones */
  calls: SharedArrayBuffer;
  large: MessagePort;
  limits: SandboxLimits;
  /** the bound of the worker's wasm heap */
  heapMaxBytes: number;
  /** idle sandboxes this worker may keep */
  warmMax: number;
  /** QuickJS's builds compiled once for all workers (absent: the worker compiles them) */
  module?: CompiledQuickJS;
  /** the service caches' versions (domain/cacheVersions.ts), when the node keeps their values:
   *  the worker then answers cache reads from its copy (cacheMirror.ts) */
  cacheVersions?: SharedArrayBuffer;
  /** How much lower than the event loop's the worker thread's scheduling priority is (nice, on
   *  Linux): a worker woken by a batch or a blocking call's answer no longer preempts the thread
   *  that serves HTTP, MQTT and sync on a full core, and a tenant's busy loop cannot slow them. */
  nice?: number;
}

/** A run to start. */
export interface RunStep {
  k: "r";
  id: number;
  /** systemKey/name, and the version of its code and libraries */
  key: string;
  st: string;
  /** the entry function */
  e: string;
  /** the caller's context: an index into the batch's contexts */
  cx: number;
  /** parameters as JSON, null for {} */
  p: string | null;
  /** deadline, epoch ms; 0: none (a stream service) */
  dl: number;
  /** keep its log lines */
  lg: 0 | 1;
  /** the run's instance id (req.service_instance_id) */
  in: string;
  /** whose rights on caches the run has (domain/cacheVersions.ts cacheRightsKey), when a worker
   *  may remember them for later runs */
  rk?: string;
}

/** The answer to a host call of a run waiting in the worker. */
export interface AnswerStep { k: "a"; id: number; c: number; x: string }

export type Step = RunStep | AnswerStep;

/** main -> worker: steps of one system, run in order. */
export interface BatchMessage {
  t: "b";
  /** sources the worker lacks for this batch's runs, by key: [version, source] */
  src?: Record<string, [string, SandboxSource]>;
  /** sources the worker may forget (the pool keeps a bounded list of what each worker holds) */
  drop?: string[];
  cx: string[];
  s: Step[];
}

/** main -> worker, at once, between batches */
export type ControlMessage =
  | { t: "abort"; id: number; why: string }
  /** drop idle sandboxes and sources of a service (key) or a system (prefix "systemKey/") */
  | { t: "forget"; key: string };

/** A run that ended. */
export interface Done {
  id: number;
  /** its outcome (see encodeOutcome) */
  o: string;
  st?: number;
  h?: Record<string, string>;
  lg?: string[];
}

/** A host call of a run. */
export interface Call { id: number; c: number; op: string; a: string }

/** worker -> main: "e" ends a batch (the worker is free again); "u" reports runs that ended
 *  between batches (a deadline passed while they waited, an abort). */
export interface ReportMessage {
  t: "e" | "u";
  heap: number;
  /** idle sandboxes it keeps */
  warm: number;
  d: Done[];
  c: Call[];
  /** the batch ended early: its steps from this index on were not started */
  r?: number;
  /** cache sets the worker made since its last message (see CacheWriteMessage) */
  w?: PostedSet[];
}

export interface ReadyMessage { t: "ready"; heap: number }

/** worker -> main: cache sets the worker made itself, not waiting for an answer (code/
 *  cacheMirror.ts, domain/cacheVersions.ts). They go with the worker's next message (a report, a
 *  blocking call: applied before what it carries), or in one of their own once they have waited
 *  SETS_HELD_MS, so that calls waiting for their tickets elsewhere wait no longer than that. */
export interface CacheWriteMessage { t: "w"; w: PostedSet[] }

/** How long a worker holds the cache sets it made before it posts them in a message of their own. */
export const SETS_HELD_MS = 2;

/** worker -> main, at once: a host call the worker thread blocks on until its answer is written
 *  into the shared call buffer (see callBuffer.ts). */
export interface BlockingCallMessage extends Call { t: "k"; w?: PostedSet[] }

/** An outcome as one string: "s"/"e" and the raw answer, "f" and the error, "T" for a timeout. */
export function encodeOutcome(o: RunOutcome): string {
  if (o.kind === "failed") return o.timedOut ? "T" : "f" + o.error;
  return (o.kind === "success" ? "s" : "e") + o.raw;
}

/** The outcome of a Done; a timeout's message names the service's own execution_timeout. */
export function decodeOutcome(d: Done, timeoutMs: number): RunOutcome {
  const c = d.o[0];
  if (c === "s" || c === "e") return { kind: c === "s" ? "success" : "error", raw: d.o.slice(1), status: d.st, headers: d.h };
  if (c === "T") return { kind: "failed", error: `execution timed out after ${timeoutMs / 1000} s`, timedOut: true };
  return { kind: "failed", error: d.o.slice(1) };
}
