// Fleet control: remote operations on an edge (an allowed command, a restart, its settings), edge
// groups, and the fleet report. (Requests relayed to an edge with the ClearBlade-Edge header are
// taken before routing: see ../edgeRelay.ts.)
import { Elysia } from "elysia";
import { jsonBody, queryOf, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

const JSON_HEADERS = { "content-type": "application/json; charset=utf-8" };

export const fleetRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  const ops = s.edgeOps, groups = s.edgeGroups;
  return new Elysia()
    .post("/api/v/1/edges/:systemKey/:name/command-exec", caller(async (p, { request, params }) => ops.exec(p, params.systemKey, params.name, await jsonBody(request))))
    // ClearBlade answers a JSON string
    .post("/api/v/1/edges/:systemKey/:name/restart", caller(async (p, { params }) =>
      new Response(JSON.stringify(await ops.restart(p, params.systemKey, params.name)), { headers: JSON_HEADERS })))
    .get("/api/v/1/edges/:systemKey/:name/config", caller((p, { params }) => ops.config(p, params.systemKey, params.name)))
    .get("/admin/:systemKey/edge_groups", caller((p, { request, params }) => groups.list(p, params.systemKey, queryOf(request).get("query"))))
    .post("/admin/:systemKey/edge_groups", caller(async (p, { request, params }) => groups.create(p, params.systemKey, await jsonBody(request))))
    .get("/admin/:systemKey/edge_groups/:name", caller((p, { request, params }) => groups.get(p, params.systemKey, params.name, queryOf(request).get("recursive") === "true")))
    .put("/admin/:systemKey/edge_groups/:name", caller(async (p, { request, params }) => groups.update(p, params.systemKey, params.name, await jsonBody(request))))
    .delete("/admin/:systemKey/edge_groups/:name", caller((p, { params }) => groups.remove(p, params.systemKey, params.name)))
    .get("/admin/edge_report", caller((p, { request }) => ops.report(p, queryOf(request).get("report_days"))));
};
