// Device keys at rest: generated keys by their SHA-256, chosen keys by argon2id plus a verifier
// under the server's secret, which is checked without argon2id, ignored (never a refusal) when it
// belongs to another secret or a replaced hash, and earned again after argon2id confirms a key.
// A chosen key first holds a stand-in hash and its key sealed; settle() makes the argon2id hash.
import { describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { DeviceKeys } from "../../../src/auth/deviceKeys.ts";
import { hashPassword, verifyPassword } from "../../../src/auth/passwords.ts";
import { hashToken } from "../../../src/core/ids.ts";
import { SecretBox } from "../../../src/auth/secrets.ts";

const keys = (secret = randomBytes(32)) => new DeviceKeys(new SecretBox(secret));

/** A chosen key once its argon2id hash has replaced the stand-in. */
async function settled(k: DeviceKeys, key: string) {
  const { sealed } = await k.chosen(key);
  const { hash, verifier } = await k.settle(sealed!);
  return { hash, verifiers: [verifier] };
}

/** A check without argon2id takes microseconds; with it, tens of milliseconds at least. */
const FAST_MS = 15;

/** Milliseconds a check takes. */
async function timed<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const t0 = performance.now();
  const r = await fn();
  return [r, performance.now() - t0];
}

describe("DeviceKeys", () => {
  test("a generated key is stored as its SHA-256 and checked without argon2id", async () => {
    const k = keys();
    const hash = DeviceKeys.generated("generated-key-abcdefghijklmnopqrstuvwxyz012345");
    expect(hash.startsWith("sha256$")).toBe(true);
    expect(hash).not.toContain("generated-key");
    const [ok, ms] = await timed(() => k.check("generated-key-abcdefghijklmnopqrstuvwxyz012345", [hash], []));
    expect(ok).toEqual({ ok: true });
    expect(ms).toBeLessThan(FAST_MS);
    expect((await k.check("generated-key-abcdefghijklmnopqrstuvwxyz012345x", [hash], [])).ok).toBe(false);
  });

  test("a chosen key at once: a stand-in hash, a verifier and the key sealed, made without argon2id", async () => {
    const k = keys();
    const [{ hash, verifiers, sealed }, ms] = await timed(() => k.chosen("my-chosen-key"));
    expect(ms).toBeLessThan(FAST_MS);
    expect(DeviceKeys.isStandIn(hash)).toBe(true);
    expect(verifiers.length).toBe(1);
    for (const stored of [hash, verifiers[0]!, sealed!]) {
      expect(stored).not.toContain("my-chosen-key");
      expect(stored).not.toContain(hashToken("my-chosen-key"));
    }
    // another device with the same key gets another stand-in and another sealed form
    const again = await k.chosen("my-chosen-key");
    expect(again.hash).not.toBe(hash);
    expect(again.sealed).not.toBe(sealed);
  });

  test("a chosen key: the verifier decides both ways, fast, before and after its argon2id hash lands", async () => {
    const k = keys();
    const c = await k.chosen("my-chosen-key");
    const s = await k.settle(c.sealed!);
    expect(s.hash.startsWith("$argon2id$")).toBe(true);
    expect(await verifyPassword("my-chosen-key", s.hash)).toBe(true);
    for (const [hash, verifiers] of [[c.hash, c.verifiers], [s.hash, [s.verifier]]] as const) {
      const [right, msRight] = await timed(() => k.check("my-chosen-key", [hash], [...verifiers]));
      const [wrong, msWrong] = await timed(() => k.check("my-chosen-kez", [hash], [...verifiers]));
      expect(right).toEqual({ ok: true });
      expect(wrong).toEqual({ ok: false });
      expect(msRight).toBeLessThan(FAST_MS);
      expect(msWrong).toBeLessThan(FAST_MS);
    }
    // the stand-in's verifier does not belong to the real hash
    expect(k.keep([s.hash], c.verifiers)).toEqual([]);
  });

  test("a stand-in without a verifier of ours is refused at once, never given to argon2id", async () => {
    const platform = keys();
    const edge = keys();
    const c = await platform.chosen("shared-key-1");
    const [r, ms] = await timed(() => edge.check("shared-key-1", [c.hash], c.verifiers));
    expect(r).toEqual({ ok: false });
    expect(ms).toBeLessThan(FAST_MS);
    expect(await new DeviceKeys(null).check("shared-key-1", [c.hash], c.verifiers)).toEqual({ ok: false });
  });

  test("a key sealed under another secret cannot be settled", async () => {
    const c = await keys().chosen("sealed-key-1");
    await expect(keys().settle(c.sealed!)).rejects.toThrow();
  });

  test("without a verifier of ours argon2id decides, and a confirmed key earns one", async () => {
    const k = keys();
    const hash = await hashPassword("legacy-key-1"); // a hash stored before verifiers existed
    expect(await k.check("legacy-key-2", [hash], [])).toEqual({ ok: false });
    const first = await k.check("legacy-key-1", [hash], []);
    expect(first.ok).toBe(true);
    expect(first.learned?.length).toBe(1);
    const [again, ms] = await timed(() => k.check("legacy-key-1", [hash], first.learned!));
    expect(again).toEqual({ ok: true });
    expect(ms).toBeLessThan(FAST_MS);
  });

  test("another secret's verifier is ignored, never a refusal", async () => {
    const platform = keys();
    const edge = keys();
    const { hash, verifiers } = await settled(platform, "shared-key-1");
    const r = await edge.check("shared-key-1", [hash], verifiers);
    expect(r.ok).toBe(true);
    // the edge keeps only a verifier of its own
    expect(r.learned?.length).toBe(1);
    expect(r.learned![0]).not.toBe(verifiers[0]);
    expect((await edge.check("shared-key-1", [hash], r.learned!)).ok).toBe(true);
    expect((await edge.check("other-key-1", [hash], verifiers)).ok).toBe(false);
  });

  test("a verifier of a replaced hash does not speak for the new one", async () => {
    const k = keys();
    const old = await k.chosen("old-key-1");
    const now = await hashPassword("new-key-1");
    // the old verifier sits next to the new hash: the new key still signs in, the old one does not
    expect((await k.check("new-key-1", [now], old.verifiers)).ok).toBe(true);
    expect((await k.check("old-key-1", [now], old.verifiers)).ok).toBe(false);
    expect(k.keep([now], old.verifiers)).toEqual([]);
    expect(k.keep([old.hash, now], old.verifiers)).toEqual(old.verifiers);
  });

  test("several hashes: any of them", async () => {
    const k = keys();
    const a = DeviceKeys.generated("rotating-key-a");
    const b = DeviceKeys.generated("rotating-key-b");
    const c = await k.chosen("chosen-key-c");
    for (const key of ["rotating-key-a", "rotating-key-b", "chosen-key-c"]) expect((await k.check(key, [c.hash, a, b], c.verifiers)).ok).toBe(true);
    expect((await k.check("nothing-here", [c.hash, a, b], c.verifiers)).ok).toBe(false);
  });

  test("without a secret box chosen keys go to argon2id and earn nothing", async () => {
    const k = new DeviceKeys(null);
    const { hash, verifiers } = await k.chosen("plain-key-1");
    expect(verifiers).toEqual([]);
    expect(await k.check("plain-key-1", [hash], [])).toEqual({ ok: true, learned: undefined });
    expect(k.refuse("x")).toBe(false);
  });
});
