// On an edge the console manages the edge's own system with the platform's pages. What its
// platform sent it (its template and the deployments naming it: the synced assets of
// GET /api/v/4/edge/status) is the platform's: pages show it read-only and say why, as the edge's
// API refuses to change it; what was made on the edge stays editable. On a platform the scope is
// null and nothing is held from elsewhere.
import { createContext } from "preact";
import { useContext } from "preact/hooks";

/** An asset of the edge's status, as the console reads it. */
export interface EdgeAsset { asset_type: string; asset_name: string; status: string; source: string; mode: string }
export interface EdgeScope { edge: string; systemKey: string; assets: Map<string, EdgeAsset> }

export const EdgeScopeContext = createContext<EdgeScope | null>(null);
export const useEdgeScope = () => useContext(EdgeScopeContext);

/** The scope of an edge from its status: the assets it holds from the platform, by type and name
 *  (one that failed to apply is not held: a local asset of that name stays the edge's). */
export function scopeOf(st: { edge: string; system_key: string; assets: EdgeAsset[] }): EdgeScope {
  return { edge: st.edge, systemKey: st.system_key, assets: new Map(st.assets.filter((a) => a.status === "synced").map((a) => [`${a.asset_type}/${a.asset_name}`, a])) };
}

/** The pages an edge serves for its system (edge records, deployments, throttling and the
 *  system's settings are its platform's). */
export const EDGE_PAGES = new Set(["collections", "services", "libraries", "users", "devices", "roles", "triggers", "timers", "webhooks", "adapters",
  "topics", "messages", "caches", "files", "running", "sessions", "audit"]);

/** Why the platform owns an asset: the deployment or the template that brings it. */
export function ownedReason(a: EdgeAsset): string {
  const deployment = a.source.split(",").find((s) => s.startsWith("deployment:"));
  return deployment ? `From the platform's deployment ${deployment.slice("deployment:".length)}: change it there.` : "From the platform's template: change it there.";
}

/** For a kind of asset: why one cannot be changed here ("" when it can: on a platform, or an
 *  asset made on this edge). */
export function usePlatformOwned(type: string): (name: string) => string {
  const scope = useEdgeScope();
  return (name) => { const a = scope?.assets.get(`${type}/${name}`); return a ? ownedReason(a) : ""; };
}

/** Whether the rows of a collection come down from the platform only (its template's
 *  `sync_to_edge`): the edge's writes would be undone by the platform's. */
export function useRowsOwned(collection: string): boolean {
  const scope = useEdgeScope();
  return scope?.assets.get(`collection/${collection}`)?.mode === "sync_to_edge";
}

/** What a platform-owned asset's page says in place of its edit controls. */
export const OwnedNote = ({ reason, id = "owned-note" }: { reason: string; id?: string }) =>
  reason ? <p class="owned muted" role="note" id={id}>{reason}</p> : null;

/** A list row's actions for a platform-owned asset: none, and why. */
export const OwnedCell = ({ reason }: { reason: string }) => <span class="muted owned-cell" title={reason}>from the platform</span>;

/** A platform-owned definition's fields, shown in place of the form that would change them. */
export const OwnedDefinition = ({ id, label, value }: { id: string; label: string; value: unknown }) =>
  <pre class="code" id={id} tabIndex={0} aria-label={label}>{JSON.stringify(value, null, 2)}</pre>;
