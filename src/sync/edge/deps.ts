// What the edge's side of sync is given, and what its steps share.
import type { SecretBox } from "../../auth/secrets.ts";
import type { Config } from "../../config.ts";
import type { EventBus } from "../../core/events.ts";
import type { Logger } from "../../core/log.ts";
import type { CompileCheck } from "../../domain/services.ts";
import type { ChangeRecorder } from "../../domain/changes.ts";
import type { Db } from "../../store/db.ts";
import type { FleetAgent } from "../fleetAgent.ts";
import type { FileSync } from "../files.ts";

export interface EdgeSyncDeps {
  db: Db; config: Config; log: Logger; events: EventBus; changes: ChangeRecorder;
  /** caches to drop after assets of a system changed underneath them */
  invalidate(systemKey: string, types: Set<string>, collections: Set<string>): void;
  /** compiles code as the engine would load it: a service or library that does not compile is
   *  not applied, and reported failed (it may come from an older platform, which did not check) */
  compileCheck?: CompileCheck;
  /** runs the requests and remote operations the platform relays (fleet control) */
  fleet?: FleetAgent;
  /** publishes a message the platform relayed to this edge on its broker, as from the platform
   *  (so it is not relayed up again) */
  deliver?(topic: string, payload: Buffer, qos: 0 | 1 | 2): Promise<void>;
  /** files to and from the platform (a bucket set's outbox up, the platform's files to its inbox) */
  files?: FileSync;
  /** seals the values kinds keep sealed (user secrets) as they arrive */
  secrets: SecretBox;
}

/** How applying an asset's change went (the platform records it): the change's position and
 *  the asset's version it brought, and the error when it failed. */
export interface AssetResult { type: string; name: string; seq: number; version?: number; error?: string }
