// How times and counts read in the console.

export { ago } from "../../core/ago.ts";

export const when = (epochS: number | null | undefined) => (epochS ? new Date(epochS * 1000).toLocaleString() : "");

const oneSource = (s: string) => (s === "edge" ? "this edge" : s.startsWith("template:") ? `template ${s.slice(9)}` : s.startsWith("deployment:") ? `deployment ${s.slice(11)}` : s);
/** Where a template entry (or the asset it brings) comes from, as the API names it (several,
 *  comma-separated, when a deployment brings it too). */
export const sourceText = (source: string | undefined) => (!source ? "–" : source.split(",").map(oneSource).join(", "));
