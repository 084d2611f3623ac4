// Trigger and timer handlers: the developer paths under
// /admin/triggers and the user-token paths under /api/v/3/code/{systemKey}.
import { Elysia } from "elysia";
import { jsonBody, principalOf } from "../request.ts";
import type { Services } from "../services.ts";

type P = Record<string, string>;
const sk = (p: unknown) => (p as P).systemKey!;
const nm = (p: unknown) => (p as P).name!;

export const handlerRoutes = (s: Services) => {
  const auth = (r: Request) => principalOf(s.tokens, r);
  let app = new Elysia()
    .get("/admin/triggers/definitions", async ({ request }) => { await auth(request); return s.triggers.definitions(); }) as unknown as Elysia;
  const families: [string, string, string, string][] = [
    ["/admin/triggers/handlers/:systemKey", "/admin/triggers/handlers/:systemKey/:name", "/admin/triggers/timers/:systemKey", "/admin/triggers/timers/:systemKey/:name"],
    ["/api/v/3/code/:systemKey/triggers", "/api/v/3/code/:systemKey/trigger/:name", "/api/v/3/code/:systemKey/timers", "/api/v/3/code/:systemKey/timer/:name"],
  ];
  for (const [triggers, trigger, timers, timer] of families) {
    app = app
      .get(triggers, async ({ request, params }) => s.triggers.listTriggers(await auth(request), sk(params)))
      .get(trigger, async ({ request, params }) => s.triggers.getTrigger(await auth(request), sk(params), nm(params)))
      .post(trigger, async ({ request, params }) => s.triggers.createTrigger(await auth(request), sk(params), nm(params), await jsonBody(request)))
      .put(trigger, async ({ request, params }) => s.triggers.updateTrigger(await auth(request), sk(params), nm(params), await jsonBody(request)))
      .delete(trigger, async ({ request, params }) => s.triggers.deleteTrigger(await auth(request), sk(params), nm(params)))
      .get(timers, async ({ request, params }) => s.triggers.listTimers(await auth(request), sk(params)))
      .get(timer, async ({ request, params }) => s.triggers.getTimer(await auth(request), sk(params), nm(params)))
      .post(timer, async ({ request, params }) => s.triggers.createTimer(await auth(request), sk(params), nm(params), await jsonBody(request)))
      .put(timer, async ({ request, params }) => s.triggers.updateTimer(await auth(request), sk(params), nm(params), await jsonBody(request)))
      .delete(timer, async ({ request, params }) => s.triggers.deleteTimer(await auth(request), sk(params), nm(params))) as unknown as Elysia;
  }
  return app;
};
