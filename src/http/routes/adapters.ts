// Adapters on /api/v/4/{systemKey}/adapters and on the
// /admin/{systemKey}/adaptors paths existing clients call; the edges of an adapter.
import { Elysia } from "elysia";
import { objectBody } from "../../core/validate.ts";
import { jsonBody, queryOf, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

type P = Record<string, string>;
const sk = (p: unknown) => (p as P).systemKey!;
const nm = (p: unknown) => (p as P).name!;
const fl = (p: unknown) => (p as P).file!;

export const adapterRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  const a = s.adapters;
  let app = new Elysia()
    .get("/admin/edges/:systemKey/control", caller((p, { request, params }) => {
      const q = queryOf(request);
      return a.edgesOf(p, params.systemKey, q.get("adapter") ?? q.get("adaptor_name") ?? q.get("adapter_name"));
    })) as unknown as Elysia;
  for (const base of ["/api/v/4/:systemKey/adapters", "/admin/:systemKey/adaptors"]) {
    const one = `${base}/:name`;
    app = app
      .get(base, caller((p, { params }) => a.list(p, sk(params))))
      .post(base, caller(async (p, { request, params }) => a.create(p, sk(params), await jsonBody(request))))
      .get(one, caller((p, { params }) => a.get(p, sk(params), nm(params))))
      .put(one, caller(async (p, { request, params }) => a.update(p, sk(params), nm(params), await jsonBody(request))))
      .delete(one, caller((p, { params }) => a.remove(p, sk(params), nm(params))))
      .get(`${one}/files`, caller((p, { params }) => a.files(p, sk(params), nm(params))))
      .post(`${one}/files`, caller(async (p, { request, params }) => a.putFile(p, sk(params), nm(params), await jsonBody(request))))
      .get(`${one}/files/:file`, caller((p, { request, params }) => a.getFile(p, sk(params), nm(params), fl(params), queryOf(request).get("version"))))
      .put(`${one}/files/:file`, caller(async (p, { request, params }) => a.overwriteFile(p, sk(params), nm(params), fl(params), await jsonBody(request))))
      .delete(`${one}/files/:file`, caller((p, { params }) => a.deleteFile(p, sk(params), nm(params), fl(params))))
      .put(`${one}/control`, caller(async (p, { request, params }) => a.control(p, sk(params), nm(params), await jsonBody(request))))
      // older clients deploy with {edges: [...]}
      .put(`${one}/deploy`, caller(async (p, { request, params }) => a.control(p, sk(params), nm(params), { ...objectBody(await jsonBody(request)), command: "deploy" }))) as unknown as Elysia;
  }
  return app;
};
