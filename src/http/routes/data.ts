// Data: collection management and items, addressed by system key
// and collection name or by collection id, on the documented paths and the variants clients call.
import { Elysia } from "elysia";
import { developerOnly, type Principal } from "../../auth/principal.ts";
import { type Query, fetchPage, parseQuery } from "../../core/query.ts";
import type { Collection } from "../../domain/collections.ts";
import { jsonBody, knownCaller, plain, principalOf, queryOf, reusedJson, systemKeyOf, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

type Params = Record<string, string>;
/** How a route's path names its collection: found with waiting, or `now` from the caches alone. */
interface Resolve {
  (s: Services, p: Principal, params: Params): Promise<Collection>;
  now(s: Services, p: Principal, params: Params): Collection | undefined;
}

const byName: Resolve = Object.assign((s: Services, p: Principal, params: Params) => s.collections.byNameFor(p, params.key!, params.name!),
  { now: (s: Services, p: Principal, params: Params) => s.collections.byNameNow(p, params.key!, params.name!) });
const byId: Resolve = Object.assign((s: Services, p: Principal, params: Params) => s.collections.byIdFor(p, params.key!),
  { now: (s: Services, p: Principal, params: Params) => s.collections.byIdNow(p, params.key!) });

/** Raw query strings of fetches with their parse (null: does not parse): a client polling the
 *  same query is not parsed again. Bounded: past this it starts over. */
const parsedQueries = new Map<string, Query | null>();
const PARSED_QUERIES_MAX = 1000;

/** A fetch's query parsed, or null when it does not parse. */
function parsedOrNull(request: Request): Query | null {
  const url = request.url;
  const search = url.indexOf("?");
  const raw = search < 0 ? "" : url.slice(search);
  let q = parsedQueries.get(raw);
  if (q !== undefined) return q;
  try { q = parseQuery(queryOf(request).get("query") ?? undefined, { continuation: true }); } catch { q = null; }
  if (parsedQueries.size >= PARSED_QUERIES_MAX) parsedQueries.clear();
  parsedQueries.set(raw, q);
  return q;
}

/** The four item operations plus count and columns, under one addressing: `address` names the
 *  collection as the path did (raw), `pageBase` as page links do (encoded, made only with a
 *  body: encoding it was a few percent of a cached read's CPU). */
function itemRoutes(app: Elysia, s: Services, base: string, resolve: Resolve, address: (params: Params) => string, pageBase: (params: Params) => string, countBase: string) {
  const ctx = async (request: Request, params: unknown) => {
    const p = await principalOf(s.tokens, request);
    return { p, c: await resolve(s, p, params as Params) };
  };
  /** The query of a fetch or count, parsed once the caller is known to be allowed to read the collection. */
  const readQuery = async (request: Request, params: unknown) => {
    const { p, c } = await ctx(request, params);
    await s.collections.mayRead(p, c);
    return { p, c, q: parseQuery(queryOf(request).get("query") ?? undefined, { continuation: true }) };
  };
  return app
    .get(base, plain((request, params) => {
      // a client polling the same query is answered without an async step when its token, the
      // collection, its rights and the result are cached (a query that does not parse takes the
      // long way, which tells a caller without rights that first)
      const known = knownCaller(s.tokens, request);
      const cached = known && resolve.now(s, known, params as unknown as Params);
      const q = cached ? parsedOrNull(request) : null;
      const hit = known && cached && q ? s.collections.fetchNow(known, cached, q) : undefined;
      // a kept result's page is encoded once per query and address
      if (hit) return reusedJson(hit, q, address(params as unknown as Params), () => fetchPage(pageBase(params as unknown as Params), q!, hit));
      return readQuery(request, params).then(async ({ p, c, q }) => fetchPage(pageBase(params as unknown as Params), q, await s.collections.fetch(p, c, q)));
    }))
    .post(base, async ({ request, params }) => {
      const { p, c } = await ctx(request, params);
      return s.collections.insert(p, c, await jsonBody(request));
    })
    .put(base, async ({ request, params }) => {
      const { p, c } = await ctx(request, params);
      return s.collections.update(p, c, await jsonBody(request));
    })
    .delete(base, async ({ request, params }) => {
      const { p, c } = await ctx(request, params);
      return s.collections.delete(p, c, queryOf(request).get("query") ?? undefined);
    })
    .get(`${countBase}/count`, async ({ request, params }) => {
      const { p, c, q } = await readQuery(request, params);
      return s.collections.count(p, c, q);
    })
    .get(`${countBase}/columns`, async ({ request, params }) => {
      const { p, c } = await ctx(request, params);
      return s.collections.columns(p, c);
    });
}

/** Upsert and index management under one addressing. */
function schemaRoutes(app: Elysia, s: Services, base: string, resolve: Resolve) {
  const ctx = async (request: Request, params: unknown) => {
    const p = await principalOf(s.tokens, request);
    return { p, c: await resolve(s, p, params as Params), q: queryOf(request) };
  };
  return app
    .put(`${base}/upsert`, async ({ request, params }) => {
      const { p, c, q } = await ctx(request, params);
      return s.collections.upsert(p, c, q.get("conflictColumn"), await jsonBody(request));
    })
    .post(`${base}/index`, async ({ request, params }) => { const { p, c, q } = await ctx(request, params); return s.collections.createIndex(p, c, q.get("columnName"), false); })
    .delete(`${base}/index`, async ({ request, params }) => { const { p, c, q } = await ctx(request, params); return s.collections.dropIndex(p, c, q.get("columnName"), false); })
    .post(`${base}/uniqueindex`, async ({ request, params }) => { const { p, c, q } = await ctx(request, params); return s.collections.createIndex(p, c, q.get("columnName"), true); })
    .delete(`${base}/uniqueindex`, async ({ request, params }) => { const { p, c, q } = await ctx(request, params); return s.collections.dropIndex(p, c, q.get("columnName"), true); })
    .get(`${base}/listindexes`, async ({ request, params }) => { const { p, c } = await ctx(request, params); return s.collections.listIndexes(p, c); });
}

export const dataRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  let app = new Elysia() as unknown as Elysia;
  for (const base of ["/api/v/3/collectionmanagement", "/admin/collectionmanagement"]) {
    // the /admin spelling of a read is a developer's; users read through /api/v/3
    const reader = base.startsWith("/admin") ? async (r: Request) => developerOnly(await principalOf(s.tokens, r)) : (r: Request) => principalOf(s.tokens, r);
    app = app
      .get(base, async ({ request }) => s.collections.describe(await reader(request), queryOf(request).get("id")))
      .post(base, caller(async (p, { request }) => s.collections.createCollection(p, await jsonBody(request), systemKeyOf(request))))
      .put(base, caller(async (p, { request }) => s.collections.updateCollection(p, await jsonBody(request))))
      .delete(base, caller((p, { request }) => s.collections.removeCollection(p, queryOf(request).get("id")))) as unknown as Elysia;
  }
  app = app
    .get("/api/v/3/allcollections/:key", caller((p, { params }) => s.collections.list(p, params.key)))
    .get("/admin/allcollections", caller((p, { request }) => s.collections.list(developerOnly(p), queryOf(request).get("appid") ?? systemKeyOf(request)))) as unknown as Elysia;

  // by system key and name
  // (an address by name has a "/", one by id none: the two never name one body)
  app = itemRoutes(app, s, "/api/v/1/collection/:key/:name", byName, (p) => `${p.key}/${p.name}`, (p) => `/api/v/1/collection/${p.key}/${encodeURIComponent(p.name!)}`, "/api/v/2/collection/:key/:name");
  // by collection id
  app = itemRoutes(app, s, "/api/v/1/data/:key", byId, (p) => p.key!, (p) => `/api/v/1/data/${p.key}`, "/api/v/1/data/:key");
  // upsert and indexes: the documented /api/v/4/data/{systemKey}/{name}, the clients' /api/v/4/collection/... and by id
  app = schemaRoutes(app, s, "/api/v/4/data/:key/:name", byName);
  app = schemaRoutes(app, s, "/api/v/4/collection/:key/:name", byName);
  app = schemaRoutes(app, s, "/api/v/4/data/:key", byId);
  return app;
};
