// Throttler administration: /admin/throttlers, throttler names URL-encoded.
import { Elysia } from "elysia";
import { jsonBody, principalOf } from "../request.ts";
import type { Services } from "../services.ts";

export const throttlerRoutes = (s: Services) => {
  const auth = (r: Request) => principalOf(s.tokens, r);
  return new Elysia()
    .get("/admin/throttlers", async ({ request }) => s.throttlers.list(await auth(request)))
    .delete("/admin/throttlers", async ({ request }) => s.throttlers.clear(await auth(request)))
    .get("/admin/throttlers/:name", async ({ request, params }) => s.throttlers.get(await auth(request), params.name))
    .delete("/admin/throttlers/:name", async ({ request, params }) => s.throttlers.clear(await auth(request), params.name))
    .post("/admin/throttlers/:name/cases", async ({ request, params }) => s.throttlers.create(await auth(request), params.name, await jsonBody(request)))
    .put("/admin/throttlers/:name/cases/:caseName", async ({ request, params }) => s.throttlers.update(await auth(request), params.name, params.caseName, await jsonBody(request)))
    .delete("/admin/throttlers/:name/cases/:caseName", async ({ request, params }) => s.throttlers.remove(await auth(request), params.name, params.caseName));
};
