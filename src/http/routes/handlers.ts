// Trigger and timer handlers: the developer paths under
// /admin/triggers and the user-token paths under /api/v/3/code/{systemKey}.
import { Elysia } from "elysia";
import { jsonBody, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

type P = Record<string, string>;
const sk = (p: unknown) => (p as P).systemKey!;
const nm = (p: unknown) => (p as P).name!;

export const handlerRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  let app = new Elysia()
    .get("/admin/triggers/definitions", caller((p) => { p; return s.triggers.definitions(); })) as unknown as Elysia;
  const families: [string, string, string, string][] = [
    ["/admin/triggers/handlers/:systemKey", "/admin/triggers/handlers/:systemKey/:name", "/admin/triggers/timers/:systemKey", "/admin/triggers/timers/:systemKey/:name"],
    ["/api/v/3/code/:systemKey/triggers", "/api/v/3/code/:systemKey/trigger/:name", "/api/v/3/code/:systemKey/timers", "/api/v/3/code/:systemKey/timer/:name"],
  ];
  for (const [triggers, trigger, timers, timer] of families) {
    app = app
      .get(triggers, caller((p, { params }) => s.triggers.listTriggers(p, sk(params))))
      .get(trigger, caller((p, { params }) => s.triggers.getTrigger(p, sk(params), nm(params))))
      .post(trigger, caller(async (p, { request, params }) => s.triggers.createTrigger(p, sk(params), nm(params), await jsonBody(request))))
      .put(trigger, caller(async (p, { request, params }) => s.triggers.updateTrigger(p, sk(params), nm(params), await jsonBody(request))))
      .delete(trigger, caller((p, { params }) => s.triggers.deleteTrigger(p, sk(params), nm(params))))
      .get(timers, caller((p, { params }) => s.triggers.listTimers(p, sk(params))))
      .get(timer, caller((p, { params }) => s.triggers.getTimer(p, sk(params), nm(params))))
      .post(timer, caller(async (p, { request, params }) => s.triggers.createTimer(p, sk(params), nm(params), await jsonBody(request))))
      .put(timer, caller(async (p, { request, params }) => s.triggers.updateTimer(p, sk(params), nm(params), await jsonBody(request))))
      .delete(timer, caller((p, { params }) => s.triggers.deleteTimer(p, sk(params), nm(params)))) as unknown as Elysia;
  }
  return app;
};
