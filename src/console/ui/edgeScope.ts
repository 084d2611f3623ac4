// On an edge the console manages the edge's own system with the platform's pages. What its
// platform sent it (its template and the deployments naming it: the synced assets of
// GET /api/v/4/edge/status) is the platform's: pages show it read-only and say why, as the edge's
// API refuses to change it; what was made on the edge stays editable. On a platform there is no
// scope and nothing is held from elsewhere. The pages reach it through components/owned.tsx.

/** An asset of the edge's status, as the console reads it. */
export interface EdgeAsset { asset_type: string; asset_name: string; status: string; source: string; mode: string }
export interface EdgeScope { edge: string; systemKey: string; assets: Map<string, EdgeAsset> }

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
