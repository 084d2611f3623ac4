// Secrets at rest (external database credentials): AES-256-GCM under a key from --secret-key, or
// from <data-dir>/secret.key, made (0600) on first start. Nodes of one platform share the key.
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const PREFIX = "v1:";

export class SecretBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error("the secret key must be 32 bytes");
  }

  /** The key given (any text: hashed to 32 bytes), or the data directory's key file. */
  static load(dataDir: string, configured?: string): SecretBox {
    if (configured) return new SecretBox(createHash("sha256").update(configured).digest());
    const path = join(dataDir, "secret.key");
    if (!existsSync(path)) {
      mkdirSync(dataDir, { recursive: true });
      writeFileSync(path, randomBytes(32).toString("base64") + "\n", { mode: 0o600, flag: "wx" });
    }
    return new SecretBox(Buffer.from(readFileSync(path, "utf8").trim(), "base64"));
  }

  /** A key for another use, derived from this one (which never leaves the box). */
  derive(purpose: string): Buffer {
    return createHmac("sha256", this.key).update(purpose).digest();
  }

  seal(plain: string): string {
    const iv = randomBytes(12);
    const c = createCipheriv("aes-256-gcm", this.key, iv);
    const body = Buffer.concat([c.update(plain, "utf8"), c.final()]);
    return PREFIX + Buffer.concat([iv, c.getAuthTag(), body]).toString("base64");
  }

  open(sealed: string): string {
    if (!sealed.startsWith(PREFIX)) throw new Error("not a sealed value");
    const raw = Buffer.from(sealed.slice(PREFIX.length), "base64");
    const d = createDecipheriv("aes-256-gcm", this.key, raw.subarray(0, 12));
    d.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([d.update(raw.subarray(28)), d.final()]).toString("utf8");
  }
}
