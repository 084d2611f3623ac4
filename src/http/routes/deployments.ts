// Deployments (/admin/{systemKey}/deployments, /api/v/3/{systemKey}/deployments), their sync
// status, and the per-asset view of which deployments and edges hold an asset.
import { Elysia } from "elysia";
import { fail } from "../../core/errors.ts";
import { jsonBody, queryOf, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

type P = Record<string, string>;
const sk = (p: unknown) => (p as P).systemKey!;
const nm = (p: unknown) => (p as P).name!;

export const deploymentRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  const d = s.deployments;
  const view = () => {
    const hub = s.sync;
    if (!hub) throw fail("INVALID_ARGUMENT", "sync status is kept by the platform, not by an edge");
    return { status: (k: string, e: string) => hub.status(k, e), connected: (k: string, e: string) => s.edges.liveOf(k, e) };
  };
  let app = new Elysia()
    .get("/admin/:systemKey/sync/deployment/status/:name", caller((p, { params }) => d.status(p, params.systemKey, params.name, view())))
    .get("/admin/:systemKey/deploy_assets", caller((p, { request, params }) => {
      // the view is not a query over stored rows: a filter would be ignored, so it is refused
      if (queryOf(request).get("query")) throw fail("INVALID_ARGUMENT", "deploy_assets takes no query here: narrow it by path (/deploy_assets/{class}[/{id}])");
      return d.assets(p, params.systemKey, {});
    }))
    // (path parameters: name is the asset class, key the asset's id)
    .get("/admin/:systemKey/deploy_assets/:name", caller(async (p, { params }) => ({ asset_class: params.name, assets: await d.assets(p, params.systemKey, { asset_class: params.name }) })))
    .get("/admin/:systemKey/deploy_assets/:name/:key", caller(async (p, { params }) => {
      const [held] = await d.assets(p, params.systemKey, { asset_class: params.name, asset_id: params.key });
      return held ?? { asset_class: params.name, asset_id: params.key, deployments: [], edges: [] };
    }))
    // ClearBlade's OpenAPI file also creates with the name in the path
    .post("/api/v/3/:systemKey/deployments/:name", caller(async (p, { request, params }) => d.create(p, params.systemKey, await jsonBody(request), params.name))) as unknown as Elysia;
  for (const base of ["/admin/:systemKey/deployments", "/api/v/3/:systemKey/deployments"]) {
    app = app
      .get(base, caller((p, { request, params }) => d.list(p, sk(params), queryOf(request).get("query"))))
      .post(base, caller(async (p, { request, params }) => d.create(p, sk(params), await jsonBody(request))))
      .get(`${base}/:name`, caller((p, { params }) => d.get(p, sk(params), nm(params))))
      .put(`${base}/:name`, caller(async (p, { request, params }) => d.update(p, sk(params), nm(params), await jsonBody(request))))
      .delete(`${base}/:name`, caller((p, { params }) => d.remove(p, sk(params), nm(params)))) as unknown as Elysia;
  }
  return app;
};
