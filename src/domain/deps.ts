// What every domain module is built with (built in compose/common.ts).
import type { Config } from "../config.ts";
import type { Permissions } from "../auth/permissions.ts";
import type { Tokens } from "../auth/tokens.ts";
import type { EventBus } from "../core/events.ts";
import type { Signals } from "../core/signals.ts";
import type { Logger } from "../core/log.ts";
import type { Db } from "../store/db.ts";
import type { ChangeRecorder } from "../domain/changes.ts";

export interface DomainDeps {
  db: Db;
  tokens: Tokens;
  perms: Permissions;
  events: EventBus;
  /** what changed, said to the parts that keep state about it (and, shared, to the other nodes) */
  signals: Signals;
  log: Logger;
  config: Config;
  /** records changes of syncable assets for edge sync (in the change's transaction) */
  changes: ChangeRecorder;
  /** Since when (ms) this process has been its database's only writer, or null while it is not
   *  (a node of a cluster; another node seen on the database): what it caches of rows that only
   *  its own writes change is exact from then on. */
  writerAloneSince(): number | null;
}
