// Service cache definitions (the caches code services share) under /admin/v/4/service_caches,
// and their values under .../:name/values (Outpost's own: ClearBlade reaches values only from
// code; the console browses and edits them). A key travels as `?key=` or in the body, never in
// the path: any text is a key, `/` included.
import { Elysia } from "elysia";
import { fail } from "../../core/errors.ts";
import { knownFields, objectBody } from "../../core/validate.ts";
import { jsonBody, queryOf, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

const VALUES = "/admin/v/4/service_caches/:systemKey/:name/values";
const VALUE_FIELDS = new Set(["key", "value"]);

export const serviceCacheRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  const c = s.serviceCaches;
  return new Elysia()
    .get("/admin/v/4/service_caches/:systemKey", caller((p, { params }) => c.list(p, params.systemKey)))
    .get("/admin/v/4/service_caches/:systemKey/:name", caller((p, { params }) => c.get(p, params.systemKey, params.name)))
    .post("/admin/v/4/service_caches/:systemKey/:name", caller(async (p, { request, params }) => c.create(p, params.systemKey, params.name, await jsonBody(request))))
    .put("/admin/v/4/service_caches/:systemKey/:name", caller(async (p, { request, params }) => c.update(p, params.systemKey, params.name, await jsonBody(request))))
    .delete("/admin/v/4/service_caches/:systemKey/:name", caller((p, { params }) => c.remove(p, params.systemKey, params.name)))
    // every pair, or one key's value (404 when it is missing or the cache expired)
    .get(`${VALUES}`, caller(async (p, { request, params }) => {
      const key = queryOf(request).get("key");
      if (key === null) return c.getAll(p, params.systemKey, params.name);
      const v = await c.getValue(p, params.systemKey, params.name, key);
      if (!v.found) throw fail("NOT_FOUND", `cache '${params.name}' has no key '${key}' (or the cache expired)`);
      return { key, value: v.value };
    }))
    .put(`${VALUES}`, caller(async (p, { request, params }) => {
      const b = knownFields(objectBody(await jsonBody(request)), VALUE_FIELDS);
      await c.set(p, params.systemKey, params.name, b.key, b.value);
      return { success: true };
    }))
    .delete(`${VALUES}`, caller(async (p, { request, params }) => {
      const key = queryOf(request).get("key");
      if (key === null) throw fail("INVALID_ARGUMENT", "the key to delete is required (?key=)");
      await c.delete(p, params.systemKey, params.name, key);
      return { success: true };
    }));
};
