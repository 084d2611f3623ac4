// Who may connect to the broker: a CONNECT's token, system key and client id, the MQTT Connections
// throttler, and the log line of a refused one (at most one a minute per system, address and reason).
import { developerReaches, type Principal, principalEmail } from "../auth/principal.ts";
import type { Tokens } from "../auth/tokens.ts";
import type { Logger } from "../core/log.ts";
import type { Systems } from "../domain/systems.ts";
import type { Throttle } from "../throttle/throttle.ts";
import type { Session } from "./session.ts";

/** A client refused again and again is logged once per this long, with the count in between. */
const REFUSAL_LOG_MS = 60_000;
const REFUSALS_KEPT = 10_000;

/** Longest client id a client may send (the system key and a slash come in front of it). */
export const CLIENT_ID_MAX = 128;
const IDENTIFIER_REJECTED = 2;
const NOT_AUTHORIZED = 5;
/** MQTT 3.1.1 has no "connection rate exceeded" (MQTT 5 0x9F): "server unavailable" is the nearest refusal */
const SERVER_UNAVAILABLE = 3;

function authError(message: string) {
  return Object.assign(new Error(message), { returnCode: NOT_AUTHORIZED });
}

export class Admission {
  /** refusals logged lately, by system and client id: when the next may be, and how many were not */
  private readonly refusals = new Map<string, { until: number; skipped: number }>();

  constructor(private readonly d: { log: Logger; tokens: Tokens; systems: Systems; throttle?: Throttle }) {}

  /** A CONNECT: its session as the packet made it (none: no CONNECT was read), username (a
   *  token) and password (the system key). Resolves with the session signed in; throws the error
   *  (with its CONNACK return code) aedes refuses the connection with. */
  async authenticate(s: Session | undefined, username: string | undefined, password: Buffer | undefined) {
    if (!s) throw authError("username (a token) and password (the system key) are required");
    // [MQTT-3.1.3-8]: a session needs a client id to be found again
    if (s.keptWithoutId) this.refuse(s, Object.assign(new Error("a client without a client id must set CleanSession"), { returnCode: IDENTIFIER_REJECTED }));
    if (!username || !password || !s.systemKey) this.refuse(s, authError("username (a token) and password (the system key) are required"));
    if (s.clientId.length > CLIENT_ID_MAX) this.refuse(s, Object.assign(new Error(`client id longer than ${CLIENT_ID_MAX} characters`), { returnCode: IDENTIFIER_REJECTED }));
    const p = await this.d.tokens.resolve(username);
    let release: (() => void) | undefined;
    try {
      // every CONNECT counts, refused ones too (a storm of bad tokens is still a storm)
      release = await this.admit(s, p);
      if (!p) throw authError("invalid token");
      const system = await this.d.systems.find(s.systemKey);
      if (!system) throw authError("unknown system");
      if (p.kind === "developer" ? !developerReaches(p, system) : p.systemKey !== s.systemKey) throw authError("the token does not belong to this system");
    } catch (err) {
      release?.();
      this.refused(s, p, (err as Error).message);
      throw err;
    }
    s.principal = p;
    s.release = release;
    s.connectedAt = Date.now();
  }

  private refuse(s: Session, err: Error): never {
    this.refused(s, null, err.message);
    throw err;
  }

  /** A refused CONNECT, logged at most once a minute per system, address and reason (a client
   *  retrying every second, or many with made-up ids, would otherwise fill the log). */
  private refused(s: Session, p: Principal | null, reason: string) {
    if (!this.d.log.enabled("warn")) return;
    const key = `${s.systemKey}\u0000${s.ip}\u0000${reason}`;
    const now = Date.now();
    const seen = this.refusals.get(key);
    if (seen && seen.until > now) { seen.skipped++; return; }
    if (this.refusals.size >= REFUSALS_KEPT) this.refusals.clear();
    this.refusals.set(key, { until: now + REFUSAL_LOG_MS, skipped: 0 });
    this.d.log.warn("mqtt connect refused", {
      clientId: s.clientId, systemKey: s.systemKey, principal: p?.kind ?? "unknown", ...(p ? { who: principalEmail(p) } : {}), ip: s.ip, reason,
      ...(seen?.skipped ? { refusedSinceLastLine: seen.skipped } : {}),
    });
  }

  /** The MQTT Connections throttler; developers are never throttled. */
  private async admit(s: Session, p: Principal | null): Promise<(() => void) | undefined> {
    const t = this.d.throttle;
    if (!t?.active("MQTT Connections") || p?.kind === "developer") return undefined;
    const d = await t.evaluate("MQTT Connections", { systemKey: s.systemKey, resource: "", ip: s.ip, email: () => (p ? principalEmail(p) : "") });
    if (!d.ok) throw Object.assign(new Error(`connection rate exceeded (case '${d.caseName}')`), { returnCode: SERVER_UNAVAILABLE });
    return d.release;
  }
}
