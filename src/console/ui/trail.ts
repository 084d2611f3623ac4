// The header's trail of links ([text, href]): each page says where it is; the layout shows it.
import { useEffect, useState } from "preact/hooks";
import { api, enc } from "./api.ts";
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
export const useSystemTrail = (sk: string, name: string, ...more: Trail) =>
  useTrail([["Systems", "#/"], [name, href("s", sk)], ...more], [sk, name, JSON.stringify(more)]);
