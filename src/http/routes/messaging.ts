// Messaging: REST publish, message history and topic listings (docs/api.md).
import { Elysia } from "elysia";
import { jsonBody, principalOf, queryOf } from "../request.ts";
import type { Services } from "../services.ts";

export const messagingRoutes = (s: Services) => new Elysia()
  .get("/api/v/1/message/:systemKey", async ({ request, params }) => s.messages.history(await principalOf(s.tokens, request), params.systemKey, queryOf(request)))
  .delete("/api/v/1/message/:systemKey", async ({ request, params }) => s.messages.deleteHistory(await principalOf(s.tokens, request), params.systemKey, queryOf(request)))
  .post("/api/v/1/message/:systemKey/publish", async ({ request, params }) => s.messages.publish(await principalOf(s.tokens, request), params.systemKey, await jsonBody(request)))
  .get("/api/v/1/message/:systemKey/currentTopics", async ({ request, params }) => s.messages.currentTopics(await principalOf(s.tokens, request), params.systemKey))
  .get("/api/v/4/message/:systemKey/topics", async ({ request, params }) => s.messages.topics(await principalOf(s.tokens, request), params.systemKey, queryOf(request).get("query")))
  .get("/api/v/4/message/:systemKey/topics/count", async ({ request, params }) => s.messages.topicCount(await principalOf(s.tokens, request), params.systemKey, queryOf(request).get("query")))
  .get("/api/v/4/message/:systemKey/storage", async ({ request, params }) => s.messages.storage(await principalOf(s.tokens, request), params.systemKey))
  .put("/api/v/4/message/:systemKey/storage", async ({ request, params }) => s.messages.putStorage(await principalOf(s.tokens, request), params.systemKey, await jsonBody(request)));
