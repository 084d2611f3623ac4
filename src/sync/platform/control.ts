// Requests to one edge that wait for its answer: adapter control commands, and fleet control
// (API requests relayed to the edge, remote operations), here or through the node holding the edge.
import { newUuid } from "../../core/ids.ts";
import { ApiError, fail } from "../../core/errors.ts";
import type { ControlResult } from "../../adapters/runner.ts";
import { AnswerSink, BODY_MAX_BYTES, chunked, type EdgeOp, FLEET_FEATURE, type RelayedAnswer } from "../fleet.ts";
import type { EdgeSession } from "./session.ts";
import type { HubState } from "./state.ts";
import type { ControlRequest, RelayRequest } from "./types.ts";

/** How much longer than a control command's own limit the platform waits for the edge's answer. */
const CONTROL_MARGIN_MS = 5_000;

/** The errors an edge's answer to a remote operation may name (any other is a bad argument). */
const ERROR_KINDS_OF_OPS = { EDGE_OFFLINE: 1, EDGE_TIMEOUT: 1, COMMAND_NOT_ALLOWED: 1, INVALID_ARGUMENT: 1, NOT_FOUND: 1 } as const;

/** A stream read whole (bounded: a relay through another node carries the body in one message). */
async function wholeBody(body: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  if (!(await chunked(body, BODY_MAX_BYTES, (c) => parts.push(c)))) throw fail("PAYLOAD_TOO_LARGE", `a request relayed to an edge carries at most ${BODY_MAX_BYTES} bytes`);
  return Buffer.concat(parts);
}

/** Sends a control command to a connected edge and waits for its answer, never longer than the
 *  command's own limit plus a margin; an edge that is not connected answers at once. */
export async function control(h: HubState, sk: string, edge: string, req: ControlRequest): Promise<ControlResult> {
  const s = h.sessions.get(`${sk}/${edge}`);
  if ((!s || s.closed) && h.elsewhere) { const r = await h.elsewhere.control(sk, edge, req); if (r) return r; }
  if (!s || s.closed) return Promise.resolve({ err: true, command: req.command, output: `edge '${edge}' is not connected` });
  const id = newUuid();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      s.controls.delete(id);
      resolve({ err: true, command: req.command, output: `edge '${edge}' did not answer within ${Math.round((req.timeoutMs + CONTROL_MARGIN_MS) / 1000)} s` });
    }, req.timeoutMs + CONTROL_MARGIN_MS);
    s.controls.set(id, (r) => { clearTimeout(timer); resolve({ ...r, command: r.command || req.command }); });
    const { name, deploy_command, start_command, stop_command, status_command, undeploy_command, logs_command, run_stop_on_deploy, run_start_on_deploy, run_deploy_on_deploy } = req.adapter;
    s.send({ t: "control", id, command: req.command, timeoutMs: req.timeoutMs, ...(req.files ? { files: req.files } : {}),
      adapter: { name, deploy_command, start_command, stop_command, status_command, undeploy_command, logs_command, run_stop_on_deploy, run_start_on_deploy, run_deploy_on_deploy } });
  });
}

/** The live session of an edge that handles fleet control, here; null when another node (or
 *  none) holds its link. An edge too old for it is refused at once. */
function fleetSession(h: HubState, sk: string, edge: string): EdgeSession | null {
  const s = h.sessions.get(`${sk}/${edge}`);
  if (!s || s.closed) return null;
  if (!s.features.includes(FLEET_FEATURE)) throw fail("EDGE_UNSUPPORTED", `edge '${edge}' runs ${s.version || "a version"} that does not take relayed requests or remote operations`);
  return s;
}

/** Relays an API request to an edge, wherever its link is held, and gives the edge's answer as it
 *  comes: its head once the edge sends it, then its body in a stream. The request body goes in
 *  chunks as it is read. An edge that is not connected, stays silent longer than the request's
 *  limit, or drops its link is an error, never a wait. */
export async function relay(h: HubState, sk: string, edge: string, req: RelayRequest): Promise<RelayedAnswer> {
  const s = fleetSession(h, sk, edge);
  if (!s) {
    if (h.elsewhere) {
      const body = req.body instanceof Uint8Array || req.body === null ? req.body : await wholeBody(req.body);
      const r = await h.elsewhere.relay(sk, edge, { ...req, body });
      if (r) return r;
    }
    throw fail("EDGE_OFFLINE", `edge '${edge}' is not connected`);
  }
  const id = newUuid();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const done = () => { clearTimeout(timer); s.relays.delete(id); };
  const sink: AnswerSink = new AnswerSink(() => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      if (!s.relays.has(id)) return;
      done();
      s.send({ t: "request_cancel", id });
      sink.fail(fail("EDGE_TIMEOUT", `edge '${edge}' did not answer within ${Math.round(req.timeoutMs / 1000)} s`));
    }, req.timeoutMs);
  });
  s.relays.set(id, sink);
  sink.onActivity();
  // a failure while the body still goes up is read below
  sink.answer.catch(() => {});
  s.send({ t: "request", id, method: req.method, path: req.path, headers: req.headers, caller: req.caller });
  const send = (chunk: Uint8Array, end: boolean) => s.send({ t: "request_body", id, chunk: Buffer.from(chunk).toString("base64"), end });
  if (req.body instanceof Uint8Array) {
    if (req.body.byteLength > BODY_MAX_BYTES) { done(); s.send({ t: "request_cancel", id }); throw fail("PAYLOAD_TOO_LARGE", `a request relayed to an edge carries at most ${BODY_MAX_BYTES} bytes`); }
    await chunked(new Blob([req.body]).stream(), BODY_MAX_BYTES, (c) => send(c, false));
  } else if (!(await chunked(req.body, BODY_MAX_BYTES, (c) => send(c, false)))) {
    done();
    s.send({ t: "request_cancel", id });
    throw fail("PAYLOAD_TOO_LARGE", `a request relayed to an edge carries at most ${BODY_MAX_BYTES} bytes`);
  }
  send(new Uint8Array(0), true);
  try {
    const answer = await sink.answer;
    // the limit also holds between chunks; the wait ends with the body
    const reader = answer.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      pull: async (c) => {
        try {
          const { done: end, value } = await reader.read();
          if (end) { done(); c.close(); } else c.enqueue(value);
        } catch (err) { done(); c.error(err); }
      },
      cancel: () => { if (s.relays.has(id)) { done(); s.send({ t: "request_cancel", id }); } },
    });
    return { ...answer, body };
  } catch (err) {
    done();
    throw err;
  }
}

/** Runs a remote operation on an edge, wherever its link is held, waiting at most `timeoutMs`. */
export async function op(h: HubState, sk: string, edge: string, op: EdgeOp, timeoutMs: number): Promise<unknown> {
  const s = fleetSession(h, sk, edge);
  if (!s) {
    const r = h.elsewhere ? await h.elsewhere.op(sk, edge, op, timeoutMs) : null;
    if (r) return r.result;
    throw fail("EDGE_OFFLINE", `edge '${edge}' is not connected`);
  }
  const id = newUuid();
  const r = await new Promise<{ result?: unknown; error?: { kind: string; message: string } }>((resolve) => {
    const timer = setTimeout(() => { s.ops.delete(id); resolve({ error: { kind: "EDGE_TIMEOUT", message: `edge '${edge}' did not answer within ${Math.round(timeoutMs / 1000)} s` } }); }, timeoutMs);
    s.ops.set(id, (m) => { clearTimeout(timer); resolve(m); });
    s.send({ t: "op", id, ...op });
  });
  if (r.error) throw new ApiError(r.error.kind in ERROR_KINDS_OF_OPS ? r.error.kind as keyof typeof ERROR_KINDS_OF_OPS : "INVALID_ARGUMENT", r.error.message);
  return r.result;
}
