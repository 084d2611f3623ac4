// Messaging: REST publish, message history and topic listings (docs/api.md).
import { Elysia } from "elysia";
import type { HistoryParams } from "../../domain/messages.ts";
import { jsonBody, queryOf, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

/** The history parameters of a request's query string. */
const historyParams = (request: Request): HistoryParams => {
  const q = queryOf(request);
  return { topic: q.get("topic"), count: q.get("count"), last: q.get("last"), start: q.get("start"), stop: q.get("stop") };
};

export const messagingRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  return new Elysia()
    .get("/api/v/1/message/:systemKey", caller((p, { request, params }) => s.messages.history(p, params.systemKey, historyParams(request))))
    .delete("/api/v/1/message/:systemKey", caller((p, { request, params }) => s.messages.deleteHistory(p, params.systemKey, historyParams(request))))
    .post("/api/v/1/message/:systemKey/publish", caller(async (p, { request, params }) => s.messages.publish(p, params.systemKey, await jsonBody(request))))
    .get("/api/v/1/message/:systemKey/currentTopics", caller((p, { params }) => s.messages.currentTopics(p, params.systemKey)))
    .get("/api/v/4/message/:systemKey/topics", caller((p, { request, params }) => s.messages.topics(p, params.systemKey, queryOf(request).get("query"))))
    .get("/api/v/4/message/:systemKey/topics/count", caller((p, { request, params }) => s.messages.topicCount(p, params.systemKey, queryOf(request).get("query"))))
    .get("/api/v/4/message/:systemKey/storage", caller((p, { params }) => s.messages.storage(p, params.systemKey)))
    .put("/api/v/4/message/:systemKey/storage", caller(async (p, { request, params }) => s.messages.putStorage(p, params.systemKey, await jsonBody(request))));
};
