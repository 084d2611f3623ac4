// What aedes keeps for each connection, made smaller where it costs memory on idle connections
// and nothing else (a fleet of idle devices is the broker's commonest load: 100,000 connections
// at 8 KB each is the target). aedes' Client listens on its connection through per-client
// closures (stream.finished's seven, two bound methods) and arms a timer per client for its
// keepalive; here the listeners are shared functions that find the client on the connection
// (aedes sets conn.client), and the keepalives of connected clients are checked by one wheel.
// The parser is replaced in publish.ts (FrameParser).
import type { Client } from "aedes";
import type { EventEmitter } from "node:events";

type Conn = EventEmitter & { client?: Client & EventEmitter };
type Parser = EventEmitter & { client?: Client & EventEmitter };
type ClientInternals = { conn: Conn; _parser: Parser; _eos: () => void; closed: boolean; close(): void; _keepaliveTimer: unknown; _keepaliveInterval: number };

// `this` is the connection: its client is the one aedes made for it
function connEnded(this: Conn) { this.client?.close(); }
function connErrored(this: Conn, err: Error) { this.client?.emit("error", err); }
// `this` is the client's parser (aedes sets parser.client)
function parserErrored(this: Parser, err: Error) { this.client?.emit("error", err); }

const noop = () => {};
const EVENTS = ["end", "error", "close"] as const;

/** How many listeners of each event the connection has before aedes takes it (see lean()). */
export function listenerCounts(conn: EventEmitter): number[] {
  return EVENTS.map((e) => conn.listenerCount(e));
}

/** Replaces the listeners aedes' Client put on its connection (`before`: listenerCounts taken
 *  before handle()) and its parser's 'error' (a bound emit) with shared ones that do the same:
 *  'end' and 'close' close the client (what stream.finished did, on 'close', which every way a
 *  connection ends gives), 'error' is the client's error. Call it right after handle(). */
export function leanListeners(client: Client, before: number[]) {
  const c = client as unknown as ClientInternals;
  c._eos(); // removes finished()'s listeners
  c._eos = noop;
  EVENTS.forEach((event, i) => {
    for (const l of c.conn.listeners(event).slice(before[i])) c.conn.removeListener(event, l as (...a: unknown[]) => void);
  });
  c.conn.on("end", connEnded);
  c.conn.on("close", connEnded);
  c.conn.on("error", connErrored);
  c._parser.removeAllListeners("error");
  c._parser.on("error", parserErrored);
}

/** How often the keepalive wheel looks at its clients (the keepalive's granularity). */
const WHEEL_MS = 1_000;

/** A connected client's keepalive, in the place of aedes' timer (client._keepaliveTimer): aedes
 *  calls refresh() on every packet and clearTimeout() on close, both of which this takes. */
class Keepalive {
  last: number;
  constructor(readonly client: Client, readonly interval: number, now: number) { this.last = now; }
  refresh() { this.last = Date.now(); return this; }
}

/** One timer for the keepalives of every connected client of a broker: past 1.5 times its
 *  keepalive ([MQTT-3.1.2-24]) without a packet, a client is closed as aedes closes it. */
export class KeepaliveWheel {
  private readonly entries = new Set<Keepalive>();
  private timer: ReturnType<typeof setInterval> | null = null;

  constructor(private readonly expired: (client: Client) => void) {}

  /** Takes over the client's keepalive timer, if it has one (call it once the client is connected). */
  adopt(client: Client) {
    const c = client as unknown as ClientInternals;
    if (!c._keepaliveTimer || c._keepaliveTimer instanceof Keepalive || c._keepaliveInterval <= 0 || c.closed) return;
    clearTimeout(c._keepaliveTimer as ReturnType<typeof setTimeout>);
    const k = new Keepalive(client, c._keepaliveInterval, Date.now());
    c._keepaliveTimer = k;
    this.entries.add(k);
    if (!this.timer) { this.timer = setInterval(() => this.turn(), WHEEL_MS); this.timer.unref?.(); }
  }

  private turn() {
    const now = Date.now();
    for (const k of this.entries) {
      const c = k.client as unknown as ClientInternals;
      // closed, or no longer this keepalive's (aedes drops its timer on close)
      if (c.closed || c._keepaliveTimer !== k) { this.entries.delete(k); continue; }
      if (now - k.last < k.interval) continue;
      this.entries.delete(k);
      this.expired(k.client);
    }
    if (this.entries.size === 0 && this.timer) { clearInterval(this.timer); this.timer = null; }
  }

  stop() {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.entries.clear();
  }
}
