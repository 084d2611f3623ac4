// The ClearBlade-Edge relay on a platform: an API request carrying `ClearBlade-Edge: <edge>` and
// the system's key (`ClearBlade-SystemKey`, any case) is answered by that edge, over its sync
// link (through the node holding it on a cluster), rather than by the platform's own routes. The
// caller is checked here (a principal of that system that may reach the edge) and again on the
// edge, which runs the request as its own API would (see src/sync/fleet.ts).
import { principalOf, systemKeyOf } from "./request.ts";
import type { Services } from "./services.ts";
import { BODY_MAX_BYTES, drain, forwardedRequestHeaders } from "../sync/fleet.ts";
import { fail } from "../core/errors.ts";

/** The edge a request is for, on a platform (null: the platform answers it itself). */
export function relayedEdge(s: Services, req: Request): string | null {
  if (!s.sync) return null;
  const edge = req.headers.get("clearblade-edge");
  return edge && systemKeyOf(req) ? edge : null;
}

/** The idle limit of a relayed request's connection (seconds; 0: none): longer than the edge may
 *  stay silent. Bun takes at most 255. */
export const relayIdleSeconds = (edgeRequestTimeout: number) => (edgeRequestTimeout + 10 <= 255 ? edgeRequestTimeout + 10 : 0);

/** Relays a request to its edge and answers with the edge's answer (status, headers, body as it
 *  comes); a failure here (caller, edge, link) is thrown, for the error envelope. */
export async function relayToEdge(s: Services, req: Request, edge: string): Promise<Response> {
  const caller = await principalOf(s.tokens, req);
  const systemKey = systemKeyOf(req)!;
  const vouched = await s.edgeOps.relayCaller(caller, systemKey, edge);
  const url = new URL(req.url);
  const bodied = req.method !== "GET" && req.method !== "HEAD";
  if (Number(req.headers.get("content-length") ?? "0") > BODY_MAX_BYTES) {
    await drain(req.body);
    throw fail("PAYLOAD_TOO_LARGE", `a request relayed to an edge carries at most ${BODY_MAX_BYTES} bytes`);
  }
  const answer = await s.sync!.relay(systemKey, edge, {
    method: req.method, path: url.pathname + url.search, headers: forwardedRequestHeaders(req.headers), caller: vouched,
    body: bodied ? req.body : null, timeoutMs: s.config.edgeRequestTimeout * 1000,
  });
  return new Response(answer.body, { status: answer.status, headers: answer.headers });
}
