// Baseline: a bare Elysia route returning a small JSON object (what Outpost's routes are built on).
import { Elysia } from "elysia";
const port = Number(process.argv[2]);
new Elysia()
  .get("/", () => ({ user_id: "58afe636d4a3c1d107978de92ea53f", email: "u@example.com", creation_date: "2026-11-22T01:04:07.960Z" }))
  .listen({ port, hostname: "127.0.0.1" });
