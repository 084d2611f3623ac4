// The sync channel's messages (JSON over a WebSocket at /api/v/4/sync on the platform's HTTP
// port). The edge speaks first; every batch the platform sends is acknowledged before the next
// one goes, which paces big snapshots and backlogs and keeps the channel free for live changes.
import { z } from "zod";
import type { TemplateEntry } from "../domain/edges.ts";
import type { DeveloperProfile } from "../store/developers.ts";
import type { ControlAdapter, ControlCommand, ControlFile } from "../adapters/runner.ts";
import type { AssetType } from "../domain/changes.ts";
import { CHUNK_BYTES, type EdgeOp, type VouchedCaller } from "./fleet.ts";
import { FILE_MESSAGES, type FileMessage } from "./files.ts";

/** A change as it travels: from the log, or made up from current state for a snapshot. */
export interface WireChange { seq: number; type: AssetType; name: string; item?: string | null; op: "upsert" | "delete"; hlc: string; body: any;
  /** the asset's version this change brings (its changes counted; rows: their collection's rows';
   *  absent from a platform that did not count them) */
  version?: number }

export const SYNC_PATH = "/api/v/4/sync";
/** Most changes and most bytes per batch. */
export const BATCH_CHANGES = 2_000;
export const BATCH_BYTES = 1_000_000;
/** How often an edge pings by default; either side drops a link silent for two periods. */
export const PING_MS = 15_000;
/** The sync protocol this build speaks, and the oldest it still serves. 1: edges from before the
 *  version was exchanged (no incarnation, template comparison or clock in the hello); 2: those. */
export const PROTOCOL_VERSION: number = 2;
export const PROTOCOL_MIN: number = 1;
/** The protocol this build says it speaks at hello and welcome: PROTOCOL_VERSION, unless the
 *  test-only OUTPOST_TEST_SYNC_PROTOCOL claims another (a black-box test of a refused pair: an
 *  edge or platform "from another release"; never set it in production). */
export const CLAIMED_PROTOCOL: number = Number(process.env.OUTPOST_TEST_SYNC_PROTOCOL) || PROTOCOL_VERSION;
/** The WebSocket close code of a side that refuses its peer's sync protocol (the reason says why). */
export const PROTOCOL_REFUSED_CLOSE = 4004;
/** Why a peer speaking `theirs` is refused by one speaking PROTOCOL_MIN..PROTOCOL_VERSION ("" : not refused). */
export function protocolRefusal(theirs: number, who: "edge" | "platform"): string {
  if (theirs >= PROTOCOL_MIN && theirs <= PROTOCOL_VERSION) return "";
  const range = PROTOCOL_MIN === PROTOCOL_VERSION ? `${PROTOCOL_VERSION}` : `${PROTOCOL_MIN} to ${PROTOCOL_VERSION}`;
  return `the ${who} speaks sync protocol ${theirs}; this ${who === "edge" ? "platform" : "edge"} speaks ${range}`;
}

// version: the asset version applied (or that failed), as the change carried it (absent from an
// edge that does not echo it: the platform finds it from seq)
const result = z.object({ type: z.string(), name: z.string(), seq: z.number(), version: z.number().int().min(0).optional(), error: z.string().optional() });

/** What an edge sends. */
export const EdgeMessage = z.discriminatedUnion("t", [
  z.object({ t: z.literal("hello"), systemKey: z.string().min(1), edge: z.string().min(1), token: z.string().min(1), cursor: z.number().int().min(0),
    version: z.string().default(""), os: z.string().default(""), arch: z.string().default(""),
    // assets that failed to apply and have not applied since (their acknowledgement may have been lost)
    failures: z.array(result).default([]),
    // a snapshot completed here (cursor 0 then means "an empty log", not "a new edge")
    synced: z.boolean().default(false),
    // Fields an older edge does not send (their defaults keep it served as before):
    // the edge record's identity the edge learnt at its first welcome ("" : none yet)
    incarnation: z.string().max(100).default(""),
    // the first hello since the edge's process started (deploy-mode assets are copied then)
    fresh: z.boolean().default(true),
    // how often the edge pings: the platform drops a session silent for two periods
    pingMs: z.number().int().min(100).max(600_000).default(PING_MS),
    // the edge's clock: its hybrid clock's stamp and its wall time (ms)
    hlc: z.string().max(200).optional(), time: z.number().optional(),
    // the sync protocol the edge speaks (an edge from before it was exchanged speaks 1)
    protocol: z.number().int().min(0).default(1),
    // items waiting in the edge's outbox (rows and messages still to come up)
    outbox: z.number().int().min(0).default(0),
    // what the edge handles beyond sync ("fleet": relayed API requests and remote operations)
    features: z.array(z.string().max(50)).max(50).default([]) }),
  z.object({ t: z.literal("ack"), upTo: z.number().int().min(0), snapshot: z.boolean().optional(), results: z.array(result).default([]) }),
  z.object({ t: z.literal("up"), items: z.array(z.object({ id: z.number().int(), kind: z.enum(["row", "message"]), body: z.string() })).max(5_000),
    // items left in the outbox after these
    left: z.number().int().min(0).optional() }),
  // with the edge's outbox size (items waiting to go up), shown on the platform's /metrics
  z.object({ t: z.literal("ping"), outbox: z.number().int().min(0).optional() }),
  // the answer to an adapter control command
  z.object({ t: z.literal("control_result"), id: z.string(), err: z.boolean(), command: z.string(), output: z.string() }),
  // a relayed request's answer: its head (status, headers) first, then its body in chunks (base64)
  z.object({ t: z.literal("response"), id: z.string(), status: z.number().int().min(100).max(599), headers: z.array(z.tuple([z.string(), z.string()])).max(200) }),
  // (`cut` with the end: the edge stopped short of its answer, past the bound or unreadable)
  z.object({ t: z.literal("response_body"), id: z.string(), chunk: z.string().max(2 * CHUNK_BYTES), end: z.boolean(), cut: z.boolean().optional() }),
  // a remote operation's answer: its result, or why it failed (an error kind and message)
  z.object({ t: z.literal("op_result"), id: z.string(), result: z.unknown().optional(),
    error: z.object({ kind: z.string(), message: z.string() }).optional() }),
  // files either way (src/sync/files.ts): offers, answers and acknowledgements; the bytes go in
  // binary frames beside these
  ...FILE_MESSAGES,
]);
export type EdgeMessage = z.infer<typeof EdgeMessage>;

const isPosition = (x: unknown): x is number => typeof x === "number" && Number.isSafeInteger(x) && x >= 0;

/** The two messages every edge sends most (an acknowledgement without results, a ping), checked
 *  by hand and built as EdgeMessage would parse them (unknown keys dropped); anything else,
 *  results included, is undefined and goes through EdgeMessage. With thousands of edges, the
 *  whole schema per acknowledgement was a large part of a change's fan-out. */
export function commonEdgeMessage(x: unknown): EdgeMessage | undefined {
  if (typeof x !== "object" || x === null || Array.isArray(x)) return undefined;
  const m = x as Record<string, unknown>;
  if (m.t === "ack") {
    if (!isPosition(m.upTo) || (m.snapshot !== undefined && typeof m.snapshot !== "boolean")) return undefined;
    if (m.results !== undefined && !(Array.isArray(m.results) && m.results.length === 0)) return undefined;
    return { t: "ack", upTo: m.upTo, ...(m.snapshot === undefined ? {} : { snapshot: m.snapshot }), results: [] };
  }
  if (m.t === "ping") {
    if (m.outbox !== undefined && !isPosition(m.outbox)) return undefined;
    return m.outbox === undefined ? { t: "ping" } : { t: "ping", outbox: m.outbox };
  }
  return undefined;
}

/** What the platform sends. */
export type PlatformMessage =
  | { t: "welcome"; system: Record<string, unknown>; owner: DeveloperProfile; template: TemplateEntry[]; snapshot: boolean; seq: number;
      /** the edge record's identity (an edge holding another one starts over); the platform's clock */
      incarnation: string; hlc: string;
      /** the sync protocol the platform speaks (absent: 1); its build ("0.2.0 (commit 1a2b3c4)") */
      protocol?: number; version?: string;
      /** the edge's named template ("" : none), which the template's entries may come from */
      templateName?: string }
  | { t: "batch"; changes: WireChange[]; upTo: number; snapshot: boolean }
  /** A snapshot is complete: the edge takes position `seq` and drops what it got from the platform
   *  of the kinds in `keep` that `keep` does not name. */
  | { t: "snapshot_end"; seq: number; keep: Record<string, string[]>;
      /** a full snapshot: the collections whose every row it brought (the edge drops the rows of
       *  them it holds that it did not bring, unless written since the welcome or still to go up) */
      rows?: string[] }
  | { t: "template"; template: TemplateEntry[]; templateName?: string }
  | { t: "up_ack"; upTo: number }
  | { t: "pong" }
  | { t: "control"; id: string; adapter: ControlAdapter; command: ControlCommand; files?: ControlFile[]; timeoutMs: number }
  /** An API request relayed to the edge (see fleet.ts): its body follows in request_body
   *  messages, the last one with end; request_cancel: the platform no longer waits for it. */
  | { t: "request"; id: string; method: string; path: string; headers: [string, string][]; caller: VouchedCaller }
  | { t: "request_body"; id: string; chunk: string; end: boolean }
  | { t: "request_cancel"; id: string }
  /** A remote operation (an allowed command, a restart, the settings). */
  | { t: "op"; id: string } & EdgeOp
  /** A message for the edge's subscribers of `topic` (a relay suffix named this edge, or every
   *  edge: see relay.ts); the payload in base64. Live only, outside the batches' pacing; an edge
   *  of an older release ignores it. */
  | { t: "relay"; topic: string; payload: string; qos: number }
  /** The platform refuses the link (then closes it): why, and (absent from a platform that did
   *  not say) what kind of refusal it is, for the edge to report and to pace its next try. */
  | { t: "error"; message: string; reason?: RefusalReason }
  /** Files either way (see files.ts); an edge of an older release ignores them. */
  | FileMessage;

/** Why a platform refuses an edge's link: its name or token ("credentials"), the sync protocol it
 *  speaks, its version, its system; "message": it broke the protocol (not JSON, no hello first). */
export type RefusalReason = "credentials" | "protocol" | "version" | "system" | "message";
