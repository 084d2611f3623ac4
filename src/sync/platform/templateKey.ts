// A template's identity: its entries in one canonical text, to see whether an edge holds its
// template and which edges may share a snapshot.
import type { TemplateEntry } from "../../domain/edges.ts";

/** Canonical texts made, by template (a template is replaced whole, never changed in place). */
const templateKeys = new WeakMap<TemplateEntry[], string>();

/** A template's entries in one canonical text (to see whether an edge holds its template; asked
 *  per log entry sent, so made once per template). */
export function templateKey(t: TemplateEntry[]): string {
  let k = templateKeys.get(t);
  if (k === undefined) templateKeys.set(t, k = canonicalTemplate(t));
  return k;
}

function canonicalTemplate(t: TemplateEntry[]): string {
  return t.map((e) => `${e.def_module}\u0000${e.def_name}\u0000${e.mode}\u0000${e.def_module === "collection" ? e.rows !== false : ""}`).sort().join("\u0001");
}
