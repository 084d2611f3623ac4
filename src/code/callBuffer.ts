// The answer to a blocking host call, from the main thread to a code worker that waits for it
// (sandbox.ts: a short operation's classic call blocks the worker thread). The worker posts the
// call at once and waits on shared memory; the main thread writes the answer there and wakes it.
// An answer too large for the buffer goes through a message port the waiting worker reads
// synchronously (receiveMessageOnPort), so the buffer stays small.
//
// Layout: Int32 [0] the call the answer belongs to, [1] what it is (ANSWER, LARGE: on the port,
// STOPPED: the run was stopped, the text says why), [2] its length in bytes, then the text as
// UTF-8 from byte HEADER.
import { type MessagePort, receiveMessageOnPort } from "node:worker_threads";

const HEADER = 16;
/** answers up to this many bytes are written into the buffer */
export const CALL_BUFFER_BYTES = 64 << 10;
const ANSWER = 0, LARGE = 1, STOPPED = 2;

const pause = new Int32Array(new SharedArrayBuffer(4));
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export const newCallBuffer = () => new SharedArrayBuffer(HEADER + CALL_BUFFER_BYTES);

/** The main thread's side: answers call `c` (its reply's JSON text, or why its run was stopped). */
export function writeAnswer(buf: SharedArrayBuffer, port: MessagePort, c: number, text: string, stopped = false) {
  const head = new Int32Array(buf, 0, 3);
  if (stopped) text = text.slice(0, 1000);
  // (encodeInto writes what fits: a text that may not fit goes whole through the port)
  const r = text.length * 3 <= CALL_BUFFER_BYTES ? encoder.encodeInto(text, new Uint8Array(buf, HEADER)) : null;
  if (r) { head[1] = stopped ? STOPPED : ANSWER; head[2] = r.written; }
  else {
    port.postMessage(`${c}:${text}`);
    head[1] = LARGE;
  }
  Atomics.store(head, 0, c);
  Atomics.notify(head, 0);
}

/** The worker's side: waits for the answer to call `c` until `deadline` (epoch ms, Infinity:
 *  none). The answer's text, null when the deadline passed first, or why the run was stopped. */
export function awaitAnswer(buf: SharedArrayBuffer, port: MessagePort, c: number, deadline: number): string | null | { stopped: string } {
  const head = new Int32Array(buf, 0, 3);
  for (;;) {
    // an older call's late answer may be there: wait until this one's is
    const seen = Atomics.load(head, 0);
    if (seen === c) break;
    const left = deadline - Date.now();
    if (left <= 0) return null;
    Atomics.wait(head, 0, seen, left);
  }
  if (head[1] === LARGE) {
    // answers of calls given up on may wait on the port before this one's (posted before the
    // header was written, it is there: the pause is for a port slower than that)
    for (const until = Date.now() + 1_000; Date.now() < until; Atomics.wait(pause, 0, 0, 1)) {
      for (let m = receiveMessageOnPort(port); m; m = receiveMessageOnPort(port)) {
        const text = m.message as string, at = text.indexOf(":");
        if (Number(text.slice(0, at)) === c) return text.slice(at + 1);
      }
    }
    return JSON.stringify({ ok: false, error: { detail: "the code engine lost the answer to this call" } });
  }
  // (decoded from a copy: TextDecoder does not take views of shared memory)
  const text = decoder.decode(new Uint8Array(buf, HEADER, head[2]).slice());
  return head[1] === STOPPED ? { stopped: text } : text;
}
