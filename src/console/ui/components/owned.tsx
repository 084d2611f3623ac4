// What the pages of an edge's console know of its platform's assets (the scope of edgeScope.ts,
// given by the layout), and what they show in place of the controls that would change one.
import { createContext } from "preact";
import { useContext } from "preact/hooks";
import { type EdgeScope, ownedReason } from "../edgeScope.ts";

/** The edge's scope; null on a platform. */
export const EdgeScopeContext = createContext<EdgeScope | null>(null);
export const useEdgeScope = () => useContext(EdgeScopeContext);

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
