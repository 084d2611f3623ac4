// Identifier and secret formats (wire reference §0.5). Everything random comes from the CSPRNG.
import { createHash, randomBytes } from "node:crypto";

const hex = (bytes: number) => randomBytes(bytes).toString("hex");

/** 30 lowercase hex characters, the shape of system keys, user ids, role and collection ids. */
export const newKey = () => hex(15);
export const newSystemKey = newKey;
/** 30 UPPERCASE hex characters. */
export const newSystemSecret = () => hex(15).toUpperCase();
export const newUuid = () => crypto.randomUUID();

/** A bearer token: 256 random bits, URL-safe. Only its hash is stored. */
export const newToken = () => randomBytes(32).toString("base64url");

/** Tokens are looked up by their SHA-256: a leaked database does not leak usable tokens. */
export const hashToken = (token: string) => createHash("sha256").update(token).digest("base64url");

export const nowSeconds = () => Math.floor(Date.now() / 1000);
export const nowIso = () => new Date().toISOString();

/** Edge and device keys as existing clients parse them. */
export const deviceKey = (systemKey: string, name: string) => `${systemKey} :: ${name}`;
export const edgeKey = (systemKey: string, name: string) => `${systemKey}:${name}`;
export const timerKey = (systemKey: string, name: string) => `${systemKey}::${name}`;
