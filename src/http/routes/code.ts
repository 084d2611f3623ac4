// Code services and libraries: execution, definitions on the paths
// existing clients use, code meta, failed runs and their retry, runs under way and ended, kept
// logs, libraries with versions.
import { Elysia } from "elysia";
import { knownFields, objectBody } from "../../core/validate.ts";
import { callerOf, jsonBody, plain, queryOf, tokenOf, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

type P = Record<string, string>;
const sk = (p: unknown) => (p as P).systemKey!;
const nm = (p: unknown) => (p as P).name!;
/** The failed runs a retry or delete names: `{id: one id or a list}`. */
const failedIds = async (r: Request) => knownFields(objectBody(await jsonBody(r)), ID_FIELD).id;
const ID_FIELD = new Set(["id"]);
/** The running instance a stop names: `{id}` in the body, or `?id=`. */
const instanceId = async (r: Request) => queryOf(r).get("id") ?? knownFields(objectBody(await jsonBody(r)), ID_FIELD).id;

export const codeRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  let app = new Elysia()
    .post("/api/v/1/code/:systemKey/:name", plain(async (request, params) => {
      // the hot path: a cached token answers without waiting
      const known = callerOf(s.tokens, request);
      const caller = known instanceof Promise ? await known : known;
      const r = await s.code.execute(caller, params.systemKey, params.name, await jsonBody(request), {
        userToken: tokenOf(request) ?? "", logging: request.headers.get("logging-enabled") === "true", resultsJson: true,
      });
      if (r instanceof Response) return r;
      const logs = r.logs !== undefined ? `,"logs":${JSON.stringify(r.logs)}` : "";
      // the results as the run gave them, not parsed and written again
      if (r.resultsJson !== undefined) {
        const answer = new Response(`{"success":${r.success},"results":${r.resultsJson}${logs}}`);
        // (set afterwards: cheaper on Bun than headers given to the constructor)
        answer.headers.set("content-type", "application/json;charset=utf-8");
        return answer;
      }
      return { success: r.success, results: r.results, ...(r.logs !== undefined ? { logs: r.logs } : {}) };
    }))
    .get("/api/v/1/code/:systemKey/:name", caller((p, { params }) => s.services.read(p, params.systemKey, params.name)))
    .get("/api/v/3/code/codemeta/:systemKey", caller((p, { params }) => s.services.codeMeta(p, params.systemKey)))
    .get("/api/v/4/:systemKey/code/failed", caller((p, { request, params }) => s.services.failed(p, params.systemKey, queryOf(request).get("query"))))
    .post("/api/v/4/:systemKey/code/failed", caller(async (p, { request, params }) => s.code.retry(p, params.systemKey, await failedIds(request))))
    .get("/api/v/3/code/:systemKey/failed", caller((p, { request, params }) => s.services.failed(p, params.systemKey, queryOf(request).get("query"))))
    .get("/codeadmin/failed/:systemKey", caller(async (p, { request, params }) => ({ [params.systemKey]: await s.services.failed(p, params.systemKey, queryOf(request).get("query")) })))
    .post("/codeadmin/failed/:systemKey", caller(async (p, { request, params }) => s.code.retry(p, params.systemKey, await failedIds(request))))
    .delete("/codeadmin/failed/:systemKey", caller(async (p, { request, params }) => s.services.deleteFailed(p, params.systemKey, await failedIds(request))))
    // runs under way, runs ended, kept logs
    .get("/codeadmin/v/3/running/:systemKey", caller((p, { params }) => s.code.running(p, params.systemKey)))
    .get("/codeadmin/v/3/running/:systemKey/:name", caller((p, { params }) => s.code.running(p, params.systemKey, params.name)))
    .delete("/codeadmin/v/3/running/:systemKey", caller(async (p, { request, params }) => s.code.stopInstance(p, params.systemKey, await instanceId(request))))
    .get("/api/v/3/code/:systemKey/completed", caller((p, { params }) => s.code.completed(p, params.systemKey))) as unknown as Elysia;
  for (const base of ["/codeadmin/v/2/logs/:systemKey/:name", "/api/v/3/code/:systemKey/logs/:name"]) {
    app = app
      .get(base, caller((p, { params }) => s.services.logs(p, params.systemKey, params.name)))
      .get(`${base}/active`, caller((p, { params }) => s.services.loggingActive(p, params.systemKey, params.name)))
      .get(`${base}/:key`, caller((p, { params }) => s.services.log(p, params.systemKey, params.name, params.key)))
      .post(base, caller(async (p, { request, params }) => s.services.setLogging(p, params.systemKey, params.name, await jsonBody(request))))
      .put(base, caller(async (p, { request, params }) => s.services.setLogLevel(p, params.systemKey, params.name, await jsonBody(request)))) as unknown as Elysia;
  }
  app = app
    // libraries
    .get("/codeadmin/v/2/library/:systemKey", caller((p, { params }) => s.services.libraries(p, params.systemKey)))
    .get("/codeadmin/v/2/library/:systemKey/:name", caller((p, { params }) => s.services.library(p, params.systemKey, params.name)))
    .post("/codeadmin/v/2/library/:systemKey/:name", caller(async (p, { request, params }) => s.services.createLibrary(p, params.systemKey, params.name, await jsonBody(request))))
    .put("/codeadmin/v/2/library/:systemKey/:name", caller(async (p, { request, params }) => s.services.updateLibrary(p, params.systemKey, params.name, await jsonBody(request))))
    .delete("/codeadmin/v/2/library/:systemKey/:name", caller((p, { params }) => s.services.removeLibrary(p, params.systemKey, params.name)))
    .get("/codeadmin/v/2/history/library/:systemKey/:name", caller((p, { params }) => s.services.libraryHistory(p, params.systemKey, params.name)))
    .get("/codeadmin/v/2/history/library/:systemKey/:name/:version", caller((p, { params }) => s.services.libraryHistory(p, params.systemKey, params.name, params.version))) as unknown as Elysia;

  // service definitions on the three path families clients use
  for (const [list, one] of [["/admin/code/v/1/:systemKey", "/admin/code/v/1/:systemKey/:name"], ["/api/v/3/code/:systemKey", "/api/v/3/code/:systemKey/service/:name"], [null, "/codeadmin/v/2/:systemKey/:name"]] as const) {
    if (list) app = app.get(list, caller((p, { params }) => s.services.names(p, sk(params)))) as unknown as Elysia;
    app = app
      .get(one, caller((p, { params }) => s.services.read(p, sk(params), nm(params))))
      .post(one, caller(async (p, { request, params }) => s.services.create(p, sk(params), nm(params), await jsonBody(request))))
      .put(one, caller(async (p, { request, params }) => s.services.update(p, sk(params), nm(params), await jsonBody(request))))
      .delete(one, caller((p, { params }) => s.services.remove(p, sk(params), nm(params)))) as unknown as Elysia;
  }
  return app;
};
