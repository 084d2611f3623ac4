// Messages relayed down: a publish on the platform whose topic suffix names edges goes to them,
// live, here or through the node of a cluster that holds them.
import type { PlatformMessage } from "../protocol.ts";
import { relayTarget } from "../relay.ts";
import type { HubState } from "./state.ts";

/** A relayed message is not sent down a link with more than this waiting to be written (an edge
 *  that cannot keep up loses relayed messages, not the platform its memory). */
const RELAY_BUFFER_MAX = 8_000_000;

/** A message published on this node whose suffix names edges (_edge/<name>, _broadcast,
 *  _edgeAndPlatform/<name>; see relay.ts) goes to them, topic unchanged: to those connected
 *  here, and through the cluster to those connected to other nodes; never to the edge it came
 *  from (`from`). Live only, as ClearBlade's relay: an edge connected to no node does not get it. */
export function relayDown(h: HubState, sk: string, topic: string, payload: Buffer, qos: number, from = ""): Promise<void> | undefined {
  // every publish on the platform comes here: most leave at once, without a promise
  const target = relayTarget(topic);
  if (!target || target.to === "platform" || !h.d.changes.logs(sk)) return;
  const text = JSON.stringify({ t: "relay", topic, payload: payload.toString("base64"), qos } satisfies PlatformMessage);
  if (target.to === "broadcast") {
    deliverHere(h, sk, "", from, text);
    return h.elsewhere?.relayMessage(sk, "", from, text).then(() => {});
  }
  if (target.edge === from || deliverHere(h, sk, target.edge, "", text)) return;
  if (!h.elsewhere) { h.relayDropped++; return; }
  return h.elsewhere.relayMessage(sk, target.edge, "", text).catch(() => false).then((sent) => { if (!sent) h.relayDropped++; });
}

/** Sends a relayed message to the edge `edge` of a system if connected here (with `edge` "":
 *  to each edge of the system connected here but `except`); whether one was. */
export function deliverHere(h: HubState, sk: string, edge: string, except: string, text: string): boolean {
  let sent = false;
  for (const s of edge ? [h.sessions.get(`${sk}/${edge}`)] : h.bySystem.get(sk) ?? []) {
    if (!s || s.closed || !s.edge || s.edge.name === except) continue;
    sent = true;
    if ((s.ws.buffered?.() ?? 0) > RELAY_BUFFER_MAX) { h.relayDropped++; continue; }
    s.ws.send(text);
  }
  return sent;
}
