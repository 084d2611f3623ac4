// Files: bucket sets (/api/v/4/bucket_sets/...) and file stores (/api/v/1/filestore/...). A bucket
// set's file is read as bare base64 text (ClearBlade's Go client keeps a non-JSON answer as a
// string); a file store's file goes in and out as raw bytes, streamed. A store's files are reached
// by the store's own auth methods, so those routes read their credentials themselves.
import { Elysia } from "elysia";
import { fail } from "../../core/errors.ts";
import type { FileAccess, FileCredentials } from "../../domain/fileStores.ts";
import { jsonBody, queryOf, systemKeyOf, tokenOf, withCaller } from "../request.ts";
import type { Services } from "../services.ts";

const SETS = "/api/v/4/bucket_sets/:systemKey";
const STORES = "/api/v/1/filestore/";
const OCTETS = { "Content-Type": "application/octet-stream" };

const decode = (x: string) => { try { return decodeURIComponent(x); } catch { throw fail("INVALID_ARGUMENT", `path element '${x}' is not valid percent-encoding`); } };

/** A store's file route from the raw URL: system, store, the operation and the path after it. */
function storePath(request: Request): { systemKey: string; store: string; path: string } {
  const url = new URL(request.url);
  const [systemKey = "", store = "", _op, ...rest] = url.pathname.slice(STORES.length).split("/");
  return { systemKey: decode(systemKey), store: decode(store), path: rest.map(decode).join("/") };
}

const credentials = (request: Request): FileCredentials => ({
  token: tokenOf(request), authorization: request.headers.get("authorization"), payloadToken: queryOf(request).get("token"),
});

/** A non-negative integer query parameter, or the default. */
function intParam(request: Request, name: string, dflt: number): number {
  const v = queryOf(request).get(name);
  if (v === null || v === "") return dflt;
  const n = Number(v);
  if (!Number.isInteger(n)) throw fail("INVALID_ARGUMENT", `${name} must be an integer`);
  return n;
}

export const fileRoutes = (s: Services) => {
  const caller = withCaller(s.tokens);
  const sets = s.bucketSets, stores = s.fileStores;
  const q = (request: Request, name: string) => queryOf(request).get(name);

  const open = async (request: Request, access: FileAccess) => {
    const { systemKey, store, path } = storePath(request);
    const files = await stores.open(systemKey || (systemKeyOf(request) ?? ""), store, access, credentials(request), path || undefined);
    return { files, path };
  };

  let app = new Elysia()
    // ---- bucket sets --------------------------------------------------------------------------
    .post(SETS, caller(async (p, { request, params }) => sets.create(p, params.systemKey, await jsonBody(request))))
    .get(SETS, caller((p, { params }) => sets.list(p, params.systemKey)))
    .get(`${SETS}/:name`, caller((p, { params }) => sets.get(p, params.systemKey, params.name)))
    .delete(`${SETS}/:name`, caller((p, { params }) => sets.remove(p, params.systemKey, params.name)))
    .get(`${SETS}/:name/files`, caller((p, { request, params }) => sets.files(p, params.systemKey, params.name, q(request, "box"))))
    .post(`${SETS}/:name/file/create`, caller(async (p, { request, params }) => sets.createFile(p, params.systemKey, params.name, await jsonBody(request))))
    .get(`${SETS}/:name/file/meta`, caller((p, { request, params }) => sets.meta(p, params.systemKey, params.name, q(request, "box"), q(request, "path"))))
    .get(`${SETS}/:name/file/read`, caller(async (p, { request, params }) => {
      const bytes = await sets.read(p, params.systemKey, params.name, q(request, "box"), q(request, "path"));
      return new Response(Buffer.from(bytes).toString("base64"), { headers: { "Content-Type": "text/plain; charset=utf-8" } });
    }))
    .post(`${SETS}/:name/file/copy`, caller(async (p, { request, params }) => sets.copyFile(p, params.systemKey, params.name, await jsonBody(request), false)))
    .post(`${SETS}/:name/file/move`, caller(async (p, { request, params }) => sets.copyFile(p, params.systemKey, params.name, await jsonBody(request), true)))
    .post(`${SETS}/:name/file/delete`, caller(async (p, { request, params }) => sets.deleteFile(p, params.systemKey, params.name, await jsonBody(request))))
    // ---- file stores: definitions ---------------------------------------------------------------
    .post(`${STORES}:systemKey`, caller(async (p, { request, params }) => stores.create(p, params.systemKey, await jsonBody(request))))
    .get(`${STORES}:systemKey`, caller((p, { request, params }) => stores.list(p, params.systemKey, q(request, "decrypt") === "true")))
    .get(`${STORES}:systemKey/:name`, caller((p, { request, params }) => stores.get(p, params.systemKey, params.name, q(request, "decrypt") === "true")))
    .delete(`${STORES}:systemKey`, caller((p, { request, params }) => stores.remove(p, params.systemKey, q(request, "name")))) as unknown as Elysia;

  // ---- file stores: files (path after the operation: any depth) ---------------------------------
  const fileGet = async ({ request }: { request: Request }) => {
    const { files, path } = await open(request, "read");
    return new Response(await stores.read(files, path), { headers: OCTETS });
  };
  const filePut = async ({ request }: { request: Request }) => {
    const len = Number(request.headers.get("content-length") ?? "0");
    if (len > stores.maxFileBytes) throw fail("PAYLOAD_TOO_LARGE", `the file is over the limit of ${stores.maxFileBytes} bytes`);
    const { files, path } = await open(request, "write");
    await stores.write(files, path, request.body ?? new Uint8Array(0));
    return {};
  };
  const fileDelete = async ({ request }: { request: Request }) => {
    const { files, path } = await open(request, "delete");
    return stores.removeFile(files, path);
  };
  const list = async ({ request }: { request: Request }) => {
    const { files, path } = await open(request, "read");
    return stores.listFiles(files, {
      prefix: path, depth: intParam(request, "depth", 1), limit: intParam(request, "limit", 100),
      continuation: q(request, "continuation_token") ?? "",
    });
  };
  const copyOrMove = (move: boolean) => async ({ request }: { request: Request }) => {
    const { files, path } = await open(request, move ? "move" : "write");
    const to = q(request, "destination");
    if (!to) throw fail("INVALID_ARGUMENT", "destination is required (?destination=<path>)");
    if (move) await files.move(path, to.replace(/^\/+/, ""));
    else await files.copy(path, to.replace(/^\/+/, ""));
    return {};
  };
  const store = `${STORES}:systemKey/:name`;
  app = app
    .get(`${store}/file/*`, fileGet).put(`${store}/file/*`, filePut).delete(`${store}/file/*`, fileDelete)
    .get(`${store}/list`, list).get(`${store}/list/*`, list)
    .put(`${store}/copy/*`, copyOrMove(false)).put(`${store}/move/*`, copyOrMove(true)) as unknown as Elysia;
  return app;
};
