// Password hashing: argon2id with the OWASP minimum parameters (19 MiB, 2 passes), which keeps
// a login well under 100 ms on a gateway CPU.
const OPTIONS = { algorithm: "argon2id", memoryCost: 19456, timeCost: 2 } as const;

export const hashPassword = (password: string) => Bun.password.hash(password, OPTIONS);

/** A hash to verify against when the account does not exist, so timing does not reveal which
 *  emails are registered. */
let dummy: Promise<string> | undefined;

export async function verifyPassword(password: string, hash: string | undefined): Promise<boolean> {
  if (!hash) {
    dummy ??= hashPassword("outpost-dummy-password");
    await Bun.password.verify(password, await dummy).catch(() => false);
    return false;
  }
  return Bun.password.verify(password, hash).catch(() => false);
}

export const MIN_PASSWORD_LENGTH = 1;
