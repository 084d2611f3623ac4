// Who is calling. Every token resolves to one of these; routes, the broker and the code engine
// all pass a Principal to the domain layer.
import { fail } from "../core/errors.ts";

/** What a developer key limits its holder to (a developer's own sign-in has no such limit). */
export interface DeveloperKeyScope {
  id: string;
  /** the systems it reaches (null: every system of the developer) */
  systems: readonly string[] | null;
  /** reads only: GET requests, MQTT subscriptions */
  readOnly: boolean;
}

export type Principal =
  | { kind: "developer"; id: string; email: string; admin: boolean; tokenHash: string; key?: DeveloperKeyScope }
  | { kind: "user"; systemKey: string; id: string; email: string; roles: string[]; tokenHash: string }
  | { kind: "anonymous"; systemKey: string; id: "anon"; email: "anon"; roles: string[]; tokenHash: string }
  | { kind: "device"; systemKey: string; id: string; name: string; roles: string[]; tokenHash: string }
  | { kind: "edge"; systemKey: string; id: string; name: string; tokenHash: string };

export type SystemPrincipal = Exclude<Principal, { kind: "developer" }>;

/** The id written into records and given to code as `userid`. */
export const principalId = (p: Principal) => (p.kind === "device" ? p.name : p.id);
/** Email for users and developers, device name for devices (the throttler's "email" slot). */
export const principalEmail = (p: Principal): string =>
  p.kind === "developer" || p.kind === "user" ? p.email : p.kind === "anonymous" ? "anon" : p.name;

export type DeveloperPrincipal = Extract<Principal, { kind: "developer" }>;

/** The principal if it is a developer; otherwise the DEVELOPER_ONLY error. */
export function developerOnly(p: Principal, what = "this operation"): DeveloperPrincipal {
  if (p.kind !== "developer") throw fail("DEVELOPER_ONLY", `${what} needs a developer token`);
  return p;
}

/** Whether a developer may act in a system: its owner or a platform admin, within what its key reaches. */
export const developerReaches = (p: DeveloperPrincipal, system: { owner_id: string; system_key: string }) =>
  (system.owner_id === p.id || p.admin) && (!p.key?.systems || p.key.systems.includes(system.system_key));

/** A read-only developer key asking for more than reading: the FORBIDDEN error, else null. */
export const readOnlyRefusal = (p: Principal, method: string) =>
  p.kind === "developer" && p.key?.readOnly && method !== "GET" && method !== "HEAD" ? fail("FORBIDDEN", "this developer key is read-only") : null;
