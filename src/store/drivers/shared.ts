// What the drivers share: one transaction at a time from this process, bound values and rows in
// one shape, and URLs without their passwords.
import { AsyncLocalStorage } from "node:async_hooks";
import type { Row, SqlValue } from "./contract.ts";

export const toArgs = (args: readonly unknown[] | undefined): SqlValue[] =>
  (args ?? []).map((a) => (typeof a === "boolean" ? (a ? 1 : 0) : a === undefined ? null : (a as SqlValue)));

/** One transaction at a time from this process, in arrival order. Async work started inside a
 *  transaction (tracked with AsyncLocalStorage) runs straight through; `open` turns false at the
 *  end so work that outlives the transaction (an event handler started in it) queues like any other. */
export class TxGate<X> {
  private queue: Promise<unknown> = Promise.resolve();
  active = false;
  private readonly als = new AsyncLocalStorage<{ open: boolean; ex: X }>();

  /** The executor of the transaction the caller is running inside, if any. */
  current(): X | undefined { const s = this.als.getStore(); return s?.open ? s.ex : undefined; }

  /** Waits while another caller's transaction is open. */
  async idle(): Promise<void> {
    while (this.active && !this.current()) await this.queue.catch(() => {});
  }

  async run<T>(begin: () => Promise<X>, fn: (ex: X) => Promise<T>, commit: (ex: X) => Promise<void>, rollback: (ex: X) => Promise<void>): Promise<T> {
    const prev = this.queue;
    let release!: () => void;
    this.queue = prev.then(() => new Promise<void>((r) => (release = r)));
    await prev.catch(() => {});
    this.active = true;
    let marker: { open: boolean; ex: X } | undefined;
    try {
      const ex = await begin();
      marker = { open: true, ex };
      const out = await this.als.run(marker, () => fn(ex)).catch(async (e) => { await rollback(ex); throw e; });
      // a COMMIT that fails (another process holds the file past the busy timeout) leaves the
      // transaction open: roll it back, or every later BEGIN on this connection fails
      await commit(ex).catch(async (e) => { await rollback(ex).catch(() => {}); throw e; });
      return out;
    } finally {
      if (marker) marker.open = false;
      this.active = false;
      release();
    }
  }

  /** Resolves once the transactions queued before it have ended. */
  drained(): Promise<void> { return this.queue.then(() => {}, () => {}); }
}

const MIN_SAFE = BigInt(Number.MIN_SAFE_INTEGER), MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** One shape of row from both drivers: integers are numbers when they fit exactly and bigint
 *  otherwise (the drivers read integers as bigint so nothing is rounded); blobs are Uint8Array
 *  (the native driver hands out ArrayBuffer from all() and Buffer from get()). */
export function fixValue(v: unknown): unknown {
  if (typeof v === "bigint") return v >= MIN_SAFE && v <= MAX_SAFE ? Number(v) : v;
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  return v;
}
export function fixRow(r: Row): Row {
  for (const k in r) { const v = r[k]; if (typeof v === "bigint" || v instanceof ArrayBuffer) r[k] = fixValue(v); }
  return r;
}

/** A connection URL without its password, for messages and logs. */
export function redactedUrl(url: string): string {
  return url.replace(/^([a-z]+:\/\/[^:/@]*):[^@]*@/i, "$1:***@");
}
