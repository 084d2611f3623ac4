// Fleet control over the sync channel: API requests the platform relays to an edge (the
// `ClearBlade-Edge` header), and remote operations (an allowed command, a restart, the edge's
// settings). Bodies travel in chunks of at most CHUNK_BYTES, both ways, so a large body never
// holds the channel in one frame and live sync messages go between its chunks; a body is bounded
// by BODY_MAX_BYTES either way.
//
// Who calls: the platform checks the caller's token and rights, then vouches for the caller over
// the edge's authenticated link (its kind and id, never its token). The edge loads that principal
// from its own copy of the system (a user's roles as the edge holds them; a user or device it does
// not hold is refused) and runs the request as its own API would, with a token valid only in its
// memory and only for that request.
import { fail } from "../core/errors.ts";
import type { TokenKind } from "../store/tokens.ts";

/** Bytes of body per message (before base64). */
export const CHUNK_BYTES = 256 * 1024;
/** Most bytes of a relayed request's body, and of an edge's answer. */
export const BODY_MAX_BYTES = 8 * 1024 * 1024;
/** What an edge that handles relayed requests and remote operations says in its hello. */
export const FLEET_FEATURE = "fleet";

export type { EdgeOp, VouchedCaller } from "../domain/edgeOps.ts";

/** Request headers not passed to the edge: the caller's credentials (the platform vouches for the
 *  caller instead), the relay's own header, and what belongs to one hop. */
const DROPPED_REQUEST = new Set(["clearblade-usertoken", "platform-usertoken", "clearblade-devtoken", "platform-devtoken", "clearblade-devicetoken",
  "platform-devicetoken", "clearblade-edge", "authorization", "cookie", "host", "connection", "keep-alive", "transfer-encoding", "content-length",
  "upgrade", "te", "trailer", "proxy-authorization", "expect"]);
/** Answer headers not passed back (one hop's, and the length: the platform sends the body as it comes). */
const DROPPED_RESPONSE = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "set-cookie", "upgrade", "trailer"]);

export const forwardedRequestHeaders = (h: Headers): [string, string][] => [...h.entries()].filter(([k]) => !DROPPED_REQUEST.has(k.toLowerCase()));
export const forwardedResponseHeaders = (h: Headers): [string, string][] => [...h.entries()].filter(([k]) => !DROPPED_RESPONSE.has(k.toLowerCase()));

/** The header an edge's own API reads a vouched caller's token from. */
export const tokenHeaderFor = (kind: TokenKind) =>
  kind === "dev" || kind === "devkey" ? "ClearBlade-DevToken" : kind === "device" ? "ClearBlade-DeviceToken" : "ClearBlade-UserToken";

/** What of a refused request body is still read, and dropped: a client still sending when the
 *  refusal is answered gets a reset connection (EPIPE) instead of the answer. */
export const DRAIN_MAX_BYTES = 64 << 20;

/** Reads and drops the rest of a body (up to DRAIN_MAX_BYTES more, then the connection goes). */
export async function drain(body: ReadableStream<Uint8Array> | null, reader = body?.getReader()): Promise<void> {
  if (!reader) return;
  try {
    for (let n = 0; n <= DRAIN_MAX_BYTES;) {
      const { done, value } = await reader.read();
      if (done) return;
      n += value.byteLength;
    }
    await reader.cancel();
  } catch { /* the client went: nothing to answer */ }
}

/** Reads a stream in chunks of at most CHUNK_BYTES, calling `each` for every one; answers false
 *  once more than `max` bytes came (the rest is read and dropped, see drain). */
export async function chunked(body: ReadableStream<Uint8Array> | null, max: number, each: (chunk: Uint8Array) => void): Promise<boolean> {
  if (!body) return true;
  const reader = body.getReader();
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return true;
    total += value.byteLength;
    if (total > max) { await drain(null, reader); return false; }
    for (let at = 0; at < value.byteLength; at += CHUNK_BYTES) each(value.subarray(at, at + CHUNK_BYTES));
  }
}

/** An answer of an edge to a relayed request as the platform hands it on. */
export interface RelayedAnswer { status: number; headers: [string, string][]; body: ReadableStream<Uint8Array> }

/** Where the chunks of one relayed answer go on the platform: the head resolves the caller's wait,
 *  chunks feed the body's stream, an end closes it; a failure before the head rejects the wait,
 *  after it errors the stream (the caller sees a cut answer, never a wrong one). */
export class AnswerSink {
  private controller: ReadableStreamDefaultController<Uint8Array> | null = null;
  private headed = false;
  private bytes = 0;
  readonly answer: Promise<RelayedAnswer>;
  private resolve!: (a: RelayedAnswer) => void;
  private reject!: (e: Error) => void;
  /** `onActivity`: called on every message of the answer (an idle timer restarts) */
  constructor(readonly onActivity: () => void = () => {}) {
    this.answer = new Promise((res, rej) => { this.resolve = res; this.reject = rej; });
  }

  get started() { return this.headed; }

  head(status: number, headers: [string, string][]) {
    if (this.headed) return;
    this.headed = true;
    this.onActivity();
    const body = new ReadableStream<Uint8Array>({ start: (c) => { this.controller = c; } });
    this.resolve({ status, headers, body });
  }

  /** A chunk (base64); false once the answer passed its bound (the caller gets a cut answer). */
  chunk(b64: string): boolean {
    this.onActivity();
    const bytes = Buffer.from(b64, "base64");
    this.bytes += bytes.byteLength;
    if (this.bytes > BODY_MAX_BYTES) { this.cut(); return false; }
    if (bytes.byteLength) this.controller?.enqueue(new Uint8Array(bytes));
    return true;
  }

  end() { try { this.controller?.close(); } catch { /* closed */ } }

  /** The edge stopped short of its answer's end (past the bound): the caller's answer fails rather
   *  than ending as if whole (a cluster node hands the caller a 413). */
  cut() { this.fail(fail("PAYLOAD_TOO_LARGE", `the edge's answer is larger than the ${BODY_MAX_BYTES} bytes a relayed answer may carry`)); }

  fail(e: Error) {
    if (!this.headed) { this.headed = true; this.reject(e); return; }
    try { this.controller?.error(e); } catch { /* closed */ }
  }
}

export interface ExecResult { command: string; output: string; exit_code: number | null; timed_out: boolean; truncated: boolean; duration_ms: number }

/** An edge's settings as its platform may read them: nothing secret. */
export function publicSettings(config: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(config)) {
    if (/token|password|secret|registrationKey|authToken/i.test(k) || (/Key$/.test(k) && k !== "systemKey")) continue;
    // a database URL may carry its password
    out[k] = k === "db" && typeof v === "string" ? v.replace(/\/\/[^@/]*@/, "//***@") : v;
  }
  return out;
}

/** Edge side: reads the allowed commands of --edge-commands-file (one command line a line, `#`
 *  starts a comment); a missing file allows none. */
export function allowedCommands(text: string | null): Set<string> {
  const out = new Set<string>();
  for (const raw of (text ?? "").split("\n")) {
    const line = raw.trim();
    if (line && !line.startsWith("#")) out.add(line);
  }
  return out;
}
