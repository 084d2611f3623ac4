// The header's trail of links ([text, href]): each page says where it is; the layout shows it.
import { useEffect, useState } from "preact/hooks";
import { api, enc } from "./api.ts";
import { useEdgeScope } from "./components/owned.tsx";
import { href } from "./router.ts";

export type Trail = [string, string][];
let show: (t: Trail) => void = () => {};
/** The layout's setter (one layout). */
export const showTrailWith = (fn: (t: Trail) => void) => { show = fn; };
export const useTrail = (t: Trail, deps: unknown[]) => useEffect(() => show(t), deps);

/** A system's name (its key until known, or when it cannot be read). */
export function useSystemName(sk: string): string {
  const [name, setName] = useState(sk);
  useEffect(() => { api<{ name: string }>("GET", `/admin/systemmanagement?id=${enc(sk)}`).then((s) => setName(s.name), () => {}); }, [sk]);
  return name;
}

/** The trail of a system's page, and the page's name within it. */
export function useSystemTrail(sk: string, name: string, ...more: Trail) {
  // an edge's console starts at the edge's own page, its one system's pages under it
  const edge = useEdgeScope();
  const top: Trail = edge ? [[`Edge ${edge.edge}`, "#/"]] : [["Systems", "#/"], [name, href("s", sk)]];
  useTrail([...top, ...more], [sk, name, edge?.edge, JSON.stringify(more)]);
}
