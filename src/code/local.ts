// Computations a service asks of the worker itself, synchronously, without a round trip to the
// main thread: they need nothing but their arguments (hashes, HMACs, random bytes). Called through
// the sandbox's __local(op, json); the answer is {ok, data} or {ok, error} JSON, like the host's.
import { createHash, createHmac, createPrivateKey, getHashes, randomBytes, randomUUID, sign } from "node:crypto";

/** The most bytes one call hashes or makes. */
const LOCAL_MAX_BYTES = 16 << 20;
const HASHES = new Set(getHashes().map((h) => h.toLowerCase()));
const ENCODINGS = new Set(["hex", "base64", "base64url", "latin1", "binary"]);

type LocalOp = (a: Record<string, unknown>) => unknown;

function bytesOf(v: unknown, encoding: unknown, what: string): Buffer {
  if (typeof v !== "string") throw new Error(`${what} must be a string`);
  const enc = encoding === undefined || encoding === null || encoding === "utf8" || encoding === "utf-8" ? "utf8" : String(encoding);
  if (enc !== "utf8" && !ENCODINGS.has(enc)) throw new Error(`unknown encoding '${enc}' (utf8, hex, base64, base64url, latin1)`);
  if (v.length > LOCAL_MAX_BYTES) throw new Error(`${what} is longer than ${LOCAL_MAX_BYTES} characters`);
  return Buffer.from(v, enc as BufferEncoding);
}

function algorithm(v: unknown): string {
  const a = typeof v === "string" ? v.toLowerCase() : "";
  if (!HASHES.has(a)) throw new Error(`unknown hash algorithm '${String(v)}' (sha1, sha256, sha384, sha512, md5, ...)`);
  return a;
}

function digestAs(enc: unknown): BufferEncoding {
  const e = enc === undefined || enc === null ? "hex" : String(enc);
  if (!ENCODINGS.has(e)) throw new Error(`unknown digest encoding '${e}' (hex, base64, base64url, latin1)`);
  return e as BufferEncoding;
}

const OPS: Record<string, LocalOp> = {
  hash: (a) => createHash(algorithm(a.algorithm)).update(bytesOf(a.data, a.inputEncoding, "data")).digest(digestAs(a.encoding)),
  hmac: (a) => createHmac(algorithm(a.algorithm), bytesOf(a.key, a.keyEncoding, "key")).update(bytesOf(a.data, a.inputEncoding, "data")).digest(digestAs(a.encoding)),
  random: (a) => {
    const n = a.size;
    if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n > 1 << 20) throw new Error("size must be a whole number of bytes up to 1 MiB");
    return randomBytes(n).toString(digestAs(a.encoding));
  },
  uuid: () => randomUUID(),
  // ClearBlade's crypto.create_jwt(claims, algorithm, key): HS256 with a shared secret, RS256 and
  // ES256 with a PEM private key
  jwt: (a) => {
    const claims = a.claims;
    if (claims === null || typeof claims !== "object" || Array.isArray(claims)) throw new Error("claims must be an object");
    if (typeof a.key !== "string" || a.key.length > 64 * 1024) throw new Error("the key must be a string (a secret, or a PEM private key)");
    const alg = String(a.algorithm);
    const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
    const input = `${part({ alg, typ: "JWT" })}.${part(claims)}`;
    let sig: Buffer;
    if (alg === "HS256") sig = createHmac("sha256", a.key).update(input).digest();
    else if (alg === "RS256" || alg === "ES256") {
      const key = createPrivateKey(a.key);
      sig = sign("sha256", Buffer.from(input), alg === "ES256" ? { key, dsaEncoding: "ieee-p1363" } : key);
    } else throw new Error(`unsupported algorithm '${alg}' (HS256, RS256, ES256)`);
    return `${input}.${sig.toString("base64url")}`;
  },
};

/** Answers one local call as JSON text. */
export function local(op: string, json: string): string {
  try {
    const fn = OPS[op];
    if (!fn) throw new Error(`unknown operation '${op}'`);
    const args = JSON.parse(json) as unknown;
    const data = fn(args !== null && typeof args === "object" ? (args as Record<string, unknown>) : {});
    return JSON.stringify({ ok: true, data });
  } catch (e) {
    return JSON.stringify({ ok: false, error: { detail: e instanceof Error ? e.message : String(e) } });
  }
}
