// Every kind of definition edge sync moves, one file each: what a snapshot reads of a system's
// assets of the kind, how a change is applied and removed, which of them an edge holds, and which
// caches a change of the kind makes stale. A new kind is its name in src/core/syncKinds.ts, its
// file here and its line below (test/unit/sync/kinds.test.ts round-trips every kind).
import type { DefinitionType } from "../../core/syncKinds.ts";
import { adapter } from "./adapter.ts";
import { bucketset } from "./bucketset.ts";
import { collection } from "./collection.ts";
import { device } from "./device.ts";
import type { DefinitionKind, StaleCache } from "./kind.ts";
import { library } from "./library.ts";
import { plugin, portal } from "./portal.ts";
import { role } from "./role.ts";
import { service } from "./service.ts";
import { serviceCache } from "./serviceCache.ts";
import { timer } from "./timer.ts";
import { trigger } from "./trigger.ts";
import { user } from "./user.ts";
import { usersecret } from "./usersecret.ts";
import { webhook } from "./webhook.ts";

export type { CollectionBody } from "./collection.ts";
export type { DefinitionKind, StaleCache } from "./kind.ts";

/** The kinds in the order a snapshot brings them: what others need first (roles before the users
 *  and devices that hold them, libraries before services, collections before their triggers,
 *  services before the webhooks that call them). */
const IN_SNAPSHOT_ORDER: readonly DefinitionKind[] = [role, library, service, collection, trigger, timer, user, adapter, device, plugin, portal, serviceCache, webhook, bucketset, usersecret];

export const SNAPSHOT_ORDER: readonly DefinitionType[] = IN_SNAPSHOT_ORDER.map((k) => k.type);

export const KINDS = Object.fromEntries(IN_SNAPSHOT_ORDER.map((k) => [k.type, k])) as Record<DefinitionType, DefinitionKind>;

/** The caches changes of these kinds make stale. */
export function staleCaches(types: Iterable<string>): Set<StaleCache> {
  const out = new Set<StaleCache>();
  for (const t of types) for (const c of KINDS[t as DefinitionType]?.stale ?? []) out.add(c);
  return out;
}
