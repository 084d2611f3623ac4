// What one area of the service library (library/*.ts) is made of: the host operations its
// JavaScript in the sandbox (prelude/*.ts) calls, run here on the main thread with the rights of
// the run's effective user.
import type { Principal } from "../../auth/principal.ts";
import type { Adapters } from "../../domain/adapters.ts";
import { fail } from "../../core/errors.ts";
import type { DomainDeps } from "../../domain/deps.ts";
import type { Collections } from "../../domain/collections.ts";
import type { BucketSets } from "../../domain/bucketSets.ts";
import type { Deployments } from "../../domain/deployments.ts";
import type { Devices } from "../../domain/devices.ts";
import type { FileStores } from "../../domain/fileStores.ts";
import type { ExternalDbs } from "../../domain/externalDbs.ts";
import type { Locks } from "../../domain/locks.ts";
import type { Messages } from "../../domain/messages.ts";
import type { Roles } from "../../domain/roles.ts";
import type { ServiceCaches } from "../../domain/serviceCaches.ts";
import type { CodeServices } from "../../domain/services.ts";
import type { Systems } from "../../domain/systems.ts";
import type { Triggers } from "../../domain/triggers.ts";
import type { Users } from "../../domain/users.ts";
import type { UserSecrets } from "../../domain/userSecrets.ts";
import type { Metrics } from "../../core/metrics.ts";
import type { EgressPolicy } from "../egress.ts";
import type { MessageTimers } from "../messageTimers.ts";
import type { OwnApi } from "../ownApi.ts";

export interface EngineDeps {
  d: DomainDeps;
  systems: Systems;
  services: CodeServices;
  collections: Collections;
  users: Users;
  devices: Devices;
  messages: Messages;
  caches: ServiceCaches;
  locks: Locks;
  /** where outbound HTTP from code may go (--code-egress-allow) */
  egress: EgressPolicy;
  /** this node's own API, which requests to cbmeta.platform_url reach in process */
  ownApi?: OwnApi;
  triggers: Triggers;
  roles: Roles;
  externalDbs: ExternalDbs;
  deployments: Deployments;
  /** messaging setTimeout/setInterval: publishes that outlive the run that asked for them */
  messageTimers: MessageTimers;
  bucketSets: BucketSets;
  fileStores: FileStores;
  secrets: UserSecrets;
  adapters: Adapters;
  metrics?: Metrics;
}

export interface ExecOptions {
  /** the caller's raw token, given to the service as req.userToken */
  userToken?: string;
  logging?: boolean;
  /** set for trigger and timer runs: skips the caller's execute permission */
  internal?: boolean;
  trigger?: string;
  /** trigger nesting depth of the run that caused this one */
  depth?: number;
  /** a retry of a recorded failure: a new failure does not add a second record */
  retry?: boolean;
  /** the results of a run that did not fail come as resultsJson (JSON text), not parsed */
  resultsJson?: boolean;
}

export interface ExecResult {
  success: boolean;
  results: unknown;
  /** with ExecOptions.resultsJson, for a run that did not fail: its results as JSON text */
  resultsJson?: string;
  logs?: string;
  status?: number;
  headers?: Record<string, string>;
  /** set when the run itself failed (exception, timeout, limits), not when it called resp.error */
  failed?: boolean;
  /** the run failed because it reached its execution timeout */
  timedOut?: boolean;
}

/** What a run holds outside its sandbox while it lasts: resources an area opened for it (a
 *  subscription inbox, an MQTT client, a held lock), each closed when the run ends. */
export class RunState {
  private readonly held = new Map<string, { value: unknown; close(): Promise<void> | void }>();
  private closed = false;
  /** Who the run acts as once its code signed in (ClearBlade.loginUser, registerUser, loginAnon,
   *  setUser): its later calls have that principal's rights instead of the run's own. */
  as: SignedIn | null = null;

  /** The run's resource under `key`, made once by `open` (with what closes it). Refused once the
   *  run ended: a host call still under way then would open what nothing closes any more. */
  resource<T>(key: string, open: () => { value: T; close(): Promise<void> | void }): T {
    let r = this.held.get(key);
    if (!r) {
      if (this.closed) throw fail("INVALID_ARGUMENT", "the run has ended");
      this.held.set(key, (r = open()));
    }
    return r.value as T;
  }

  /** The resource, if the run opened it. */
  peek<T>(key: string): T | undefined { return this.held.get(key)?.value as T | undefined; }

  /** Closes everything the run opened (when it ends, however it ends); at once, without a
   *  promise, when it opened nothing (most runs). */
  close(log: (what: string, err: unknown) => void): Promise<void> | undefined {
    this.closed = true;
    if (this.held.size === 0) return;
    return this.closeAll(log);
  }

  private async closeAll(log: (what: string, err: unknown) => void) {
    const all = [...this.held.entries()];
    this.held.clear();
    await Promise.all(all.map(async ([k, r]) => { try { await r.close(); } catch (err) { log(k, err); } }));
  }
}

/** A session code opened for itself: the principal, the email it signed in with and its token. */
export interface SignedIn { principal: Principal; email: string | null; token: string }

/** One host call's context. */
export interface HostContext {
  /** the run's effective user (the caller, or the service's run_user) */
  p: Principal;
  systemKey: string;
  /** how deep in services calling services this run is */
  depth: number;
  run: RunState;
  e: EngineDeps;
  /** runs another service (Code().execute) */
  execute(p: Principal, systemKey: string, name: string, params: unknown, opts: ExecOptions): Promise<ExecResult>;
}

/** A host operation: its arguments as the prelude sent them (JSON), its answer any JSON value. */
export type HostOp = (ctx: HostContext, args: Record<string, any>) => unknown;

/** One area of the library. */
export interface LibraryArea {
  /** host operations by name (the prelude's area of the same name calls them) */
  ops: Record<string, HostOp>;
}

/** A query argument as the domain takes it (JSON text, undefined for none). */
export const queryText = (v: unknown) => (v === null || v === undefined ? undefined : JSON.stringify(v));
