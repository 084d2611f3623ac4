// What a kind of definition does in edge sync (one file per kind beside this one, listed in
// index.ts; the kinds' names and where their names are stored: src/core/syncKinds.ts).
import type { SecretBox } from "../../auth/secrets.ts";
import type { Executor } from "../../store/db.ts";
import type { DefinitionType } from "../../core/syncKinds.ts";

/** What a change of a kind makes stale on the node that applies it. */
export type StaleCache = "code" | "triggers" | "tokens" | "servicecaches" | "webhooks";

export interface DefinitionKind<R = any> {
  type: DefinitionType;
  /** the system's assets of the kind, as stored */
  list(ex: Executor, sk: string): Promise<R[]>;
  /** an asset's name in templates, the change log and sync status */
  nameOf(r: R): string;
  /** the body a change carries (read only for the assets a snapshot takes) */
  body(ex: Executor, sk: string, r: R): Promise<unknown> | unknown;
  /** makes the local asset what the body says */
  apply(ex: Executor, sk: string, name: string, body: any): Promise<unknown>;
  /** removes the local asset a delete names (its body carries what identifies it) */
  remove(ex: Executor, sk: string, name: string, body: any): Promise<unknown>;
  /** the body of a delete of the local asset called `name`; undefined when there is nothing to
   *  delete (a kind keyed by an id whose asset is gone, a built-in role). Deleting an asset that is
   *  not there does nothing. */
  deleteBody(ex: Executor, sk: string, name: string): Promise<unknown>;
  stale: readonly StaleCache[];
  /** a kind whose bodies hold a value sealed by the node that keeps it: the body of an upsert as
   *  it leaves the platform (opened), and as the edge keeps it (sealed with its own box) */
  wire?: { out(body: any, box: SecretBox): unknown; in(body: any, box: SecretBox): unknown };
}

/** The body of a delete of a kind keyed by its name. */
export const byName = async (name: string) => ({ name });

/** Code kept as one row per name, its body the row (services, libraries). */
export function codeRows<R extends { name: string; system_key: string }>(type: "service" | "library", repo: {
  list(ex: Executor, sk: string): Promise<R[]>; put(ex: Executor, r: R): Promise<unknown>; delete(ex: Executor, sk: string, name: string): Promise<unknown>;
}): DefinitionKind<R> {
  return {
    type, list: (ex, sk) => repo.list(ex, sk), nameOf: (r) => r.name, body: (_ex, _sk, r) => r,
    apply: (ex, sk, _n, b: R) => repo.put(ex, { ...b, system_key: sk }),
    remove: (ex, sk, name) => repo.delete(ex, sk, name),
    deleteBody: (_ex, _sk, name) => byName(name), stale: ["code"],
  };
}
