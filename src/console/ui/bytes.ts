// Files in and out of the browser: the API's calls that carry bytes rather than JSON (a file
// store's files), base64 both ways (a bucket set's files travel as base64 in JSON), and a
// download started from a Blob.
import { CallError, session } from "./api.ts";

/** A call whose answer is bytes; a refusal throws the envelope's detail as api() does. */
export async function fetchBytes(method: string, path: string, body?: Blob): Promise<Blob> {
  const headers: Record<string, string> = { "Content-Type": "application/octet-stream" };
  if (session.token) headers["ClearBlade-DevToken"] = session.token;
  const r = await fetch(path, { method, headers, body, cache: "no-store" });
  if (!r.ok) {
    const text = await r.text();
    let envelope: any;
    try { envelope = JSON.parse(text)?.error; } catch { /* not an envelope */ }
    throw new CallError(envelope?.detail ?? envelope?.message ?? `${r.status} ${r.statusText}`, r.status, envelope?.code, envelope);
  }
  return r.blob();
}

export async function base64Of(blob: Blob): Promise<string> {
  const bytes = new Uint8Array(await blob.arrayBuffer());
  let s = "";
  // in slices: String.fromCharCode takes a bounded number of arguments
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

export function blobOfBase64(b64: string): Blob {
  const s = atob(b64.trim());
  const bytes = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) bytes[i] = s.charCodeAt(i);
  return new Blob([bytes]);
}

/** Saves a Blob as a file named `name` (the browser's download). */
export function download(name: string, blob: Blob) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
