// Baseline for POST routes: a bare Elysia route that reads a JSON body and answers JSON, the same
// work shape as executing a service (which is a POST with a parameters body).
import { Elysia } from "elysia";
const port = Number(process.argv[2]);
new Elysia()
  .get("/", () => "ok")
  .post("/", async ({ request }) => ({ success: true, results: JSON.parse((await request.text()) || "{}") }))
  .listen({ port, hostname: "127.0.0.1" });
