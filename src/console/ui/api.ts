// The console's one way to the server: the public REST API with the signed-in developer's token
// in the ClearBlade-DevToken header. The token lives in sessionStorage (gone with the tab, never
// in a URL). A failed call throws a CallError carrying the error envelope's detail, which pages
// show to the user as it is.

const TOKEN_KEY = "outpost.devToken", EMAIL_KEY = "outpost.email";

export const session = {
  token: sessionStorage.getItem(TOKEN_KEY),
  email: sessionStorage.getItem(EMAIL_KEY),
};

/** Told when the session ends (signed out, or the server no longer takes the token). */
let onSignedOut = () => {};
export const whenSignedOut = (fn: () => void) => { onSignedOut = fn; };

export function signedIn(token: string, email: string) {
  session.token = token;
  session.email = email;
  sessionStorage.setItem(TOKEN_KEY, token);
  sessionStorage.setItem(EMAIL_KEY, email);
}

export function forget() {
  session.token = null;
  session.email = null;
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(EMAIL_KEY);
  etags.clear();
}

/** A failed call: the envelope's detail as the message, the HTTP status and the envelope's code. */
export class CallError extends Error {
  constructor(message: string, readonly status: number, readonly code?: number, readonly envelope?: Record<string, unknown>) { super(message); }
}

/** The last answer and its ETag per path, for conditional polling. */
const etags = new Map<string, { tag: string; body: unknown }>();

async function send(method: string, path: string, body: unknown, conditional: boolean): Promise<{ status: number; json: any }> {
  const headers: Record<string, string> = {};
  if (session.token) headers["ClearBlade-DevToken"] = session.token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const known = conditional ? etags.get(path) : undefined;
  if (known) headers["If-None-Match"] = known.tag;
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store" });
  if (r.status === 304 && known) return { status: 304, json: known.body };
  const text = await r.text();
  let json: any;
  try { json = text ? JSON.parse(text) : undefined; } catch { json = text; }
  if (!r.ok) {
    const envelope = json?.error;
    // an expired or revoked session: sign in again
    if (session.token && (r.status === 401 || envelope?.code === 204)) { forget(); onSignedOut(); }
    throw new CallError(envelope?.detail ?? envelope?.message ?? (typeof json === "string" && json ? json : `${r.status} ${r.statusText}`), r.status, envelope?.code, envelope);
  }
  const tag = r.headers.get("etag");
  if (conditional && tag) etags.set(path, { tag, body: json });
  return { status: r.status, json };
}

export async function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  return (await send(method, path, body, false)).json as T;
}

/** A GET that sends the ETag of the last answer: `changed` is false when the server answered 304
 *  (the body is then the one it answered before). */
export async function poll<T = any>(path: string): Promise<{ changed: boolean; body: T }> {
  const r = await send("GET", path, undefined, true);
  return { changed: r.status !== 304, body: r.json as T };
}

let about: Promise<{ buildId: string; version: string }> | undefined;
/** Which mode the server runs in: an edge's console shows that edge. */
export const serverMode = async () => ((await (about ??= api("GET", "/api/about"))).buildId === "edge" ? "edge" : "platform");

export const enc = encodeURIComponent;

export { caselessPattern, literalPattern, queryParam } from "./query.ts";
