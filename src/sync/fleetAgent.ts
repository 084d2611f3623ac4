// The edge's side of fleet control (see fleet.ts): runs the API requests its platform relays
// through its own API, as the caller the platform vouches for, and the remote operations it asks
// for (an allowed command, a restart, its settings).
import type { Port } from "../core/port.ts";
import { readFileSync } from "node:fs";
import type { Tokens } from "../auth/tokens.ts";
import type { Config } from "../config.ts";
import { ApiError, envelope, type ErrorKindName, ErrorKinds, fail } from "../core/errors.ts";
import type { Logger } from "../core/log.ts";
import type { AdapterRunner } from "../adapters/runner.ts";
import { allowedCommands, BODY_MAX_BYTES, chunked, type EdgeOp, type ExecResult, forwardedResponseHeaders, publicSettings, tokenHeaderFor } from "./fleet.ts";
import type { PlatformMessage } from "./protocol.ts";

/** Longest a remote command may run, whatever it asks. */
export const EXEC_MAX_MS = 300_000;

export interface FleetAgentDeps {
  config: Config; log: Logger; tokens: Tokens;
  /** runs allowed commands: in their directory, as --edge-commands-user when the edge runs as root */
  commands: AdapterRunner;
  /** the edge's own API (attached once the HTTP listener is built): a relayed request is answered by it */
  api: Port<(req: Request) => Promise<Response>>;
  /** restarts the edge's parts in this process (given by the command line; null: not possible here) */
  restart: (() => void) | null;
}

type Send = (m: unknown) => void;

interface Incoming { body: ReadableStreamDefaultController<Uint8Array> | null; bytes: number; cancelled: boolean }

export class FleetAgent {
  private readonly incoming = new Map<string, Incoming>();

  constructor(private readonly d: FleetAgentDeps) {}

  /** Handles a fleet message; false when the message is not one. */
  handle(m: PlatformMessage, send: Send): boolean {
    switch (m.t) {
      case "request": void this.request(m, send); return true;
      case "request_body": {
        const r = this.incoming.get(m.id);
        if (!r || r.cancelled) return true;
        const bytes = Buffer.from(m.chunk, "base64");
        r.bytes += bytes.byteLength;
        try {
          if (bytes.byteLength) r.body?.enqueue(new Uint8Array(bytes));
          if (m.end) r.body?.close();
        } catch { /* the handler stopped reading */ }
        if (m.end && !r.body) this.incoming.delete(m.id);
        return true;
      }
      case "request_cancel": {
        const r = this.incoming.get(m.id);
        if (r) { r.cancelled = true; try { r.body?.error(new Error("cancelled by the platform")); } catch { /* closed */ } }
        return true;
      }
      case "op": void this.op(m, send); return true;
      default: return false;
    }
  }

  /** A relayed request: run by this edge's API as the vouched caller; the answer goes back in a
   *  head and chunks. */
  private async request(m: Extract<PlatformMessage, { t: "request" }>, send: Send) {
    const r: Incoming = { body: null, bytes: 0, cancelled: false };
    const bodied = m.method !== "GET" && m.method !== "HEAD";
    const body = bodied ? new ReadableStream<Uint8Array>({ start: (c) => { r.body = c; } }) : null;
    this.incoming.set(m.id, r);
    let release = () => {};
    try {
      const api = this.d.api.get();
      if (!api) throw fail("EDGE_OFFLINE", "the edge is still starting");
      const headers = new Headers(m.headers);
      if (m.caller.systemKey !== this.d.config.systemKey) throw fail("NOT_AUTHORIZED_FOR_SYSTEM", "the caller is not of this edge's system");
      const v = await this.d.tokens.vouch(m.caller.kind, m.caller.id, m.caller.kind === "dev" || m.caller.kind === "devkey" ? this.d.config.systemKey! : m.caller.systemKey, m.caller.readOnly);
      if (!v) throw fail("PERMISSION_DENIED", `the caller (${m.caller.kind} '${m.caller.id}') is not known on this edge: it has not synced here`);
      release = v.release;
      headers.set(tokenHeaderFor(m.caller.kind), v.token);
      const path = m.path.startsWith("/") ? m.path : `/${m.path}`;
      const answer = await api(new Request(`http://edge.local${path}`, { method: m.method, headers, body, ...(body ? { duplex: "half" } : {}) } as RequestInit));
      await this.answer(m.id, answer, send, r);
    } catch (err) {
      const e = err instanceof ApiError ? err : new ApiError("INTERNAL", String((err as Error)?.message ?? err));
      if (!(err instanceof ApiError)) this.d.log.warn("a relayed request failed on the edge", { err });
      await this.answer(m.id, new Response(JSON.stringify(envelope(e)), { status: e.kind.status, headers: { "content-type": "application/json; charset=utf-8" } }), send, r);
    } finally {
      release();
      this.incoming.delete(m.id);
    }
  }

  private async answer(id: string, res: Response, send: Send, r: Incoming) {
    const length = Number(res.headers.get("content-length") ?? "0");
    if (length > BODY_MAX_BYTES) {
      void res.body?.cancel().catch(() => {});
      res = new Response(JSON.stringify(envelope(fail("PAYLOAD_TOO_LARGE", `the edge's answer (${length} bytes) is larger than the ${BODY_MAX_BYTES} bytes a relayed answer may carry`))), { status: 413, headers: { "content-type": "application/json; charset=utf-8" } });
    }
    send({ t: "response", id, status: res.status, headers: forwardedResponseHeaders(res.headers) });
    // an answer past the bound (or one that fails as it is read) is cut: the platform fails the
    // caller's answer rather than end it as if whole
    const whole = await chunked(res.body, BODY_MAX_BYTES, (c) => { if (!r.cancelled) send({ t: "response_body", id, chunk: Buffer.from(c).toString("base64"), end: false }); })
      .catch((err) => { this.d.log.warn("a relayed answer could not be read", { err }); return false; });
    send({ t: "response_body", id, chunk: "", end: true, ...(whole ? {} : { cut: true }) });
  }

  /** A remote operation; its result (or error) goes back on the channel. */
  private async op(m: Extract<PlatformMessage, { t: "op" }>, send: Send) {
    try {
      const result = await this.run(m);
      send({ t: "op_result", id: m.id, result });
      if (m.op === "restart") setTimeout(() => this.d.restart?.(), 200);
    } catch (err) {
      const e = err instanceof ApiError ? err : null;
      const kind = e ? (Object.keys(ErrorKinds) as ErrorKindName[]).find((k) => ErrorKinds[k] === e.kind) ?? "INVALID_ARGUMENT" : "INVALID_ARGUMENT";
      send({ t: "op_result", id: m.id, error: { kind, message: e ? e.detail : String((err as Error)?.message ?? err) } });
    }
  }

  private async run(op: EdgeOp): Promise<unknown> {
    switch (op.op) {
      case "config": return publicSettings(this.d.config as unknown as Record<string, unknown>);
      case "restart":
        if (!this.d.restart) throw fail("INVALID_ARGUMENT", "this edge cannot restart itself (it does not run from its command line)");
        this.d.log.warn("restart asked by the platform");
        return "restarting";
      case "exec": {
        const allowed = this.allowed();
        const command = op.command.trim();
        if (!allowed.has(command))
          throw fail("COMMAND_NOT_ALLOWED", allowed.size ? `'${command}' is not one of the commands this edge allows (--edge-commands-file)` : "this edge allows no commands (--edge-commands-file)");
        const started = Date.now();
        const timeoutMs = Math.min(op.timeoutMs, EXEC_MAX_MS);
        this.d.log.info("remote command", { command });
        const r = await this.d.commands.exec(command, timeoutMs);
        const result: ExecResult = { command, output: r.output, exit_code: r.code, timed_out: r.timedOut, truncated: r.truncated, duration_ms: Date.now() - started };
        return result;
      }
    }
  }

  /** The allowed commands, read at each use: an operator's change holds without a restart. */
  private allowed(): Set<string> {
    const file = this.d.config.edgeCommandsFile;
    if (!file) return new Set();
    try { return allowedCommands(readFileSync(file, "utf8")); } catch (err) {
      this.d.log.warn("the allowed commands cannot be read (--edge-commands-file)", { file, err: (err as Error).message });
      return new Set();
    }
  }
}
