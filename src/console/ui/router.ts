// A hash router: #/s/<systemKey>/<page>/<args...>. The hash keeps the console one static page the
// server hands out whatever the route, and a link is a plain <a href>.
import { useEffect, useState } from "preact/hooks";

export const parts = () => location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);

/** The route's parts, re-read on every change of the hash. */
export function useRoute(): string[] {
  const [p, setP] = useState(parts);
  useEffect(() => {
    const on = () => setP(parts());
    window.addEventListener("hashchange", on);
    return () => window.removeEventListener("hashchange", on);
  }, []);
  return p;
}

/** The href of a route from its parts. */
export const href = (...p: string[]) => `#/${p.map(encodeURIComponent).join("/")}`;
export const go = (...p: string[]) => { location.hash = href(...p); };
