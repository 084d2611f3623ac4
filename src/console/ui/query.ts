// The API's query language as the console writes it (pure: no browser state, unit-tested).

/** A query (FILTERS, SORT, PAGESIZE, PAGENUM) as the `query` URL parameter. */
export function queryParam(q: { filters?: Record<string, unknown>[]; sort?: [string, "ASC" | "DESC"]; pageSize?: number; page?: number }): string {
  const o: Record<string, unknown> = {};
  if (q.filters?.length) o.FILTERS = [q.filters];
  if (q.sort) o.SORT = [{ [q.sort[1]]: q.sort[0] }];
  if (q.pageSize) { o.PAGESIZE = q.pageSize; o.PAGENUM = q.page ?? 1; }
  return `query=${encodeURIComponent(JSON.stringify(o))}`;
}

/** A regular expression matching `text` literally (a search box's text in an RE filter). */
export const literalPattern = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** A pattern matching `text` literally in any letter case (the engines' REGEXP have no common
 *  case-insensitive flag): "gw-A" -> "[gG][wW]-[aA]". */
export const caselessPattern = (text: string) =>
  literalPattern(text).replace(/[a-z]/gi, (c) => (c.toLowerCase() === c.toUpperCase() ? c : `[${c.toLowerCase()}${c.toUpperCase()}]`));
