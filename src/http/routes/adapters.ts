// Adapters on /api/v/4/{systemKey}/adapters and on the
// /admin/{systemKey}/adaptors paths existing clients call; the edges of an adapter.
import { Elysia } from "elysia";
import { objectBody } from "../../core/validate.ts";
import { jsonBody, principalOf, queryOf } from "../request.ts";
import type { Services } from "../services.ts";

type P = Record<string, string>;
const sk = (p: unknown) => (p as P).systemKey!;
const nm = (p: unknown) => (p as P).name!;
const fl = (p: unknown) => (p as P).file!;

export const adapterRoutes = (s: Services) => {
  const auth = (r: Request) => principalOf(s.tokens, r);
  const a = s.adapters;
  let app = new Elysia()
    .get("/admin/edges/:systemKey/control", async ({ request, params }) => {
      const q = queryOf(request);
      return a.edgesOf(await auth(request), params.systemKey, q.get("adapter") ?? q.get("adaptor_name") ?? q.get("adapter_name"));
    }) as unknown as Elysia;
  for (const base of ["/api/v/4/:systemKey/adapters", "/admin/:systemKey/adaptors"]) {
    const one = `${base}/:name`;
    app = app
      .get(base, async ({ request, params }) => a.list(await auth(request), sk(params)))
      .post(base, async ({ request, params }) => a.create(await auth(request), sk(params), await jsonBody(request)))
      .get(one, async ({ request, params }) => a.get(await auth(request), sk(params), nm(params)))
      .put(one, async ({ request, params }) => a.update(await auth(request), sk(params), nm(params), await jsonBody(request)))
      .delete(one, async ({ request, params }) => a.remove(await auth(request), sk(params), nm(params)))
      .get(`${one}/files`, async ({ request, params }) => a.files(await auth(request), sk(params), nm(params)))
      .post(`${one}/files`, async ({ request, params }) => a.putFile(await auth(request), sk(params), nm(params), await jsonBody(request)))
      .get(`${one}/files/:file`, async ({ request, params }) => a.getFile(await auth(request), sk(params), nm(params), fl(params), queryOf(request).get("version")))
      .put(`${one}/files/:file`, async ({ request, params }) => a.overwriteFile(await auth(request), sk(params), nm(params), fl(params), await jsonBody(request)))
      .delete(`${one}/files/:file`, async ({ request, params }) => a.deleteFile(await auth(request), sk(params), nm(params), fl(params)))
      .put(`${one}/control`, async ({ request, params }) => a.control(await auth(request), sk(params), nm(params), await jsonBody(request)))
      // older clients deploy with {edges: [...]}
      .put(`${one}/deploy`, async ({ request, params }) => a.control(await auth(request), sk(params), nm(params), { ...objectBody(await jsonBody(request)), command: "deploy" })) as unknown as Elysia;
  }
  return app;
};
