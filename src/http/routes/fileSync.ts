// Files sent from a platform to an edge: a bucket set's file put into the edge's inbox (what
// ClearBladeAsync.FS(set).syncFileToEdge does from code), and how its transfer goes in the edge's
// sync status. Only a platform sends: an edge's outbox goes up by itself.
import { Elysia } from "elysia";
import { fail } from "../../core/errors.ts";
import { knownFields, objectBody } from "../../core/validate.ts";
import { jsonBody, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

const SYNC_FIELDS: ReadonlySet<string> = new Set(["box", "path", "edge"]);

export const fileSyncRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  return new Elysia()
    // {box, path, edge}: the file <box>/<path> of the set lands in the edge's inbox/<path>
    .post("/api/v/4/bucket_sets/:systemKey/:name/file/sync_to_edge", caller(async (p, { request, params }) => {
      if (!s.sync) throw fail("INVALID_ARGUMENT", "files are sent to an edge by its platform, not by an edge");
      const b = knownFields(objectBody(await jsonBody(request)), SYNC_FIELDS);
      if (typeof b.box !== "string" || typeof b.path !== "string") throw fail("INVALID_ARGUMENT", "box and path must be strings");
      if (typeof b.edge !== "string" || !b.edge) throw fail("INVALID_ARGUMENT", "edge must name an edge of the system");
      return s.bucketSets.sendToEdge(p, params.systemKey, params.name, `${b.box}/${b.path}`, b.edge);
    })) as unknown as Elysia;
};
