// What the platform's side of edge sync shares between its steps: its dependencies, the socket of
// an edge's link, the other nodes of a cluster, relayed requests, and per-asset status.
import type { SecretBox } from "../../auth/secrets.ts";
import type { Signals } from "../../core/signals.ts";
import type { Port } from "../../core/port.ts";
import type { EventBus } from "../../core/events.ts";
import type { Logger } from "../../core/log.ts";
import type { Collections } from "../../domain/collections.ts";
import type { EdgeLinks, Edges } from "../../domain/edges.ts";
import type { Broker } from "../../domain/messages.ts";
import type { ChangeRecorder } from "../../domain/changes.ts";
import type { Db } from "../../store/db.ts";
import type { ControlAdapter, ControlCommand, ControlFile, ControlResult } from "../../adapters/runner.ts";
import type { EdgeOp, RelayedAnswer, VouchedCaller } from "../fleet.ts";
import type { FileSync } from "../files.ts";

export interface Socket { send(text: string): void; close(code?: number, reason?: string): void; terminate?(): void;
  /** sends a binary frame (file bytes) */
  sendBinary?(bytes: Uint8Array): void;
  /** the peer's address, for the log */
  remote?: string;
  /** bytes sent but not yet written to the network (a link falling behind) */
  buffered?(): number }

export interface HubDeps {
  db: Db; log: Logger; events: EventBus; signals: Signals; changes: ChangeRecorder; edges: Edges; collections: Collections;
  /** where this hub tells Edges of the links it holds (attached at start) */
  edgeLinks: Port<EdgeLinks>;
  /** set in a cluster: reaches the edges other nodes hold (attached by the cluster) */
  elsewhere: Port<ElsewhereHub>;
  broker: () => Broker | null;
  /** row stamps further ahead of this clock are refused (ms) */
  maxClockSkewMs: number;
  /** a refused edge is logged once per this period (ms; --sync-log-ms) */
  logMs: number;
  /** how often the change log is compacted (ms) */
  compactMs: number;
  /** this platform node: the edges whose connections it holds carry it */
  nodeId: string;
  /** files to and from edges (bucket sets' outbox and inbox) */
  files?: FileSync;
  /** opens the values kinds keep sealed (user secrets) as they go to an edge */
  secrets: SecretBox;
}

/** An adapter control command for an edge, and how long it may take there. */
export interface ControlRequest { adapter: ControlAdapter; command: ControlCommand; files?: ControlFile[]; timeoutMs: number }

/** Another node of a cluster, for an edge whose connection this node does not hold: the answer
 *  of the node that holds it, or null when none does. */
export interface ElsewhereHub {
  control(sk: string, edge: string, req: ControlRequest): Promise<ControlResult | null>;
  retry(sk: string, edge: string, only?: { type: string; name: string }[]): Promise<{ edge: string; connected: boolean; queued: number } | null>;
  /** a relayed request (its body whole, within BODY_MAX_BYTES) through the node holding the edge */
  relay(sk: string, edge: string, req: RelayRequest & { body: Uint8Array | null }): Promise<RelayedAnswer | null>;
  op(sk: string, edge: string, op: EdgeOp, timeoutMs: number): Promise<{ result: unknown } | null>;
  /** A relayed message (its wire text) for the edge `edge` wherever it is connected (false: on no
   *  node), or with `edge` "" for every edge of the system but `except` on the other nodes. */
  relayMessage(sk: string, edge: string, except: string, text: string): Promise<boolean>;
}

/** An API request to relay to an edge: the caller the platform vouches for, and how long the
 *  edge may stay silent (before its answer begins, and between its chunks). */
export interface RelayRequest {
  method: string; path: string; headers: [string, string][]; caller: VouchedCaller;
  body: ReadableStream<Uint8Array> | Uint8Array | null; timeoutMs: number;
}

/** How applying an asset's change went, as an edge reports it. */
export type AssetResult = { type: string; name: string; seq: number; version?: number; error?: string };

/** Status of one asset on one edge. */
export interface AssetStatus {
  /** a file (asset_type "file") is also "transferring" while its bytes move */
  asset_type: string; asset_name: string; status: "pending" | "transferring" | "synced" | "failed";
  /** the asset's version (its changes counted) and the one the edge holds */
  desired_version: number; applied_version: number; last_error: string; attempts: number; updated_at: string;
  /** the template entry that brings it ("service/*") and where that comes from ("edge",
   *  "template:<name>" for the edge's named template, "deployment:<name>", comma-separated when
   *  several bring it); "" for an asset no entry brings any more */
  source: string; entry: string;
  /** files: which way, and how many of their bytes the receiver holds */
  direction?: "to_platform" | "to_edge"; bytes_done?: number; bytes_total?: number;
}
