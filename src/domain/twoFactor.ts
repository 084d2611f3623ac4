// Developers' two-factor sign-in. With two-factor on (the developer's own choice, PUT
// /admin/userinfo, or required of all by /admin/settings/security), a correct password answers a
// challenge instead of a token: a 6-digit code goes out by email, SMS or both, and POST
// /admin/auth/verify trades it, with the challenge's intermediate token, for the developer token.
// A code lives CODE_TTL_S, is good once, and a challenge dies after MAX_ATTEMPTS wrong codes; a
// developer is sent at most MAX_CHALLENGES codes in CHALLENGE_WINDOW_S.
// The code is kept as an HMAC under a key derived from the node's secret key (a copy of the
// database alone does not give it away), the intermediate token as a hash; challenges live in the
// database, so any node of a cluster can check them.
import { createHmac, randomInt } from "node:crypto";
import { z } from "zod";
import type { SecretBox } from "../auth/secrets.ts";
import { fail, failFor } from "../core/errors.ts";
import { hashToken, newToken, newUuid, nowSeconds } from "../core/ids.ts";
import { validate } from "../core/validate.ts";
import type { DeveloperRow } from "../store/developers.ts";
import { challengesRepo } from "../store/twoFactor.ts";
import type { DomainDeps } from "./deps.ts";
import { fillTemplate, type InstanceSettings } from "./settings.ts";

export const CODE_TTL_S = 300;
export const MAX_ATTEMPTS = 5;
/** Challenges a developer may be sent in CHALLENGE_WINDOW_S: each takes the right password, but
 *  without a bound a thief of the password could guess codes MAX_ATTEMPTS at a time for ever. */
export const MAX_CHALLENGES = 5;
export const CHALLENGE_WINDOW_S = 600;
const CODE_DIGITS = 6;

const VerifyBody = z.object({
  // a code sent as a number lost its leading zeros
  code: z.union([z.string().min(1).max(20), z.number().int().nonnegative().transform((n) => String(n).padStart(CODE_DIGITS, "0"))]),
  otp_id: z.string().min(1).max(100),
  two_factor_method: z.string().max(20).optional(),
  otp_issued: z.union([z.string().max(40), z.number()]).optional(),
}).strict();

/** The answer to a correct password when a code is needed (Go's client reads dev_token as a
 *  string even here, and the five after is_two_factor as strings). */
export interface TwoFactorChallenge {
  dev_token: ""; is_two_factor: true; next_step_url: string; intermediate_token: string;
  two_factor_method: string; otp_id: string; otp_issued: string; user_id: string;
}

/** What Developers asks of two-factor sign-in (attached through a port: built after them). */
export interface SecondFactor {
  /** the challenge answer when the developer must give a code, null when the password is enough */
  challengeFor(dev: DeveloperRow): Promise<TwoFactorChallenge | null>;
  /** the developer whose challenge this code answers (throws otherwise) */
  verify(intermediateToken: string | null, body: unknown): Promise<string>;
  developerTokenTtl(): Promise<number>;
  /** whether every developer must sign in with a code */
  requiredOfAll(): Promise<boolean>;
  /** refuses turning two-factor on when its codes could not be sent */
  checkCanEnable(method: string, phone: string): Promise<void>;
}

export class TwoFactor implements SecondFactor {
  private readonly codeKey: Buffer;

  /** `now`: epoch seconds (a test's own clock) */
  constructor(private readonly d: DomainDeps, private readonly settings: InstanceSettings, secrets: SecretBox, private readonly now = nowSeconds) {
    this.codeKey = secrets.derive("developer two-factor codes");
  }

  private codeHash(otpId: string, code: string) {
    return createHmac("sha256", this.codeKey).update(`${otpId}\u0000${code}`).digest("base64url");
  }

  async requiredOfAll() { return (await this.settings.security()).two_factor_auth.enabled; }
  developerTokenTtl() { return this.settings.developerTokenTtl(); }

  async checkCanEnable(method: string, phone: string) {
    if (method.includes("email") && !(await this.settings.emailService()))
      throw fail("INVALID_ARGUMENT", "two_factor_enabled: the email service is not configured on this instance (the platform admin sets it with /admin/settings/email-service)");
    if (method.includes("sms")) {
      if (!(await this.settings.smsService())) throw fail("INVALID_ARGUMENT", "two_factor_enabled: the SMS service is not configured on this instance (the platform admin sets it with /admin/settings/sms-service)");
      if (!phone) throw fail("INVALID_ARGUMENT", "two_factor_enabled: set a phone number to receive codes by SMS");
    }
  }

  async challengeFor(dev: DeveloperRow): Promise<TwoFactorChallenge | null> {
    const own = dev.two_factor_enabled === 1;
    if (!own && !(await this.requiredOfAll())) return null;
    // required of all but never chosen: by email, the address every developer has
    const method = own && dev.two_factor_method ? dev.two_factor_method : "email";
    const now = this.now();
    await challengesRepo.purge(this.d.db, now - 2 * CHALLENGE_WINDOW_S);
    const recent = await challengesRepo.issuedSince(this.d.db, dev.id, now - CHALLENGE_WINDOW_S);
    if (recent >= MAX_CHALLENGES)
      throw failFor(CHALLENGE_WINDOW_S / 2, "THROTTLED", `${MAX_CHALLENGES} sign-in codes were sent to this developer in the last ${CHALLENGE_WINDOW_S / 60} minutes: wait before signing in again`);
    const otpId = newUuid(), token = newToken();
    const code = String(randomInt(0, 10 ** CODE_DIGITS)).padStart(CODE_DIGITS, "0");
    await challengesRepo.insert(this.d.db, {
      otp_id: otpId, developer_id: dev.id, token_hash: hashToken(token), code_hash: this.codeHash(otpId, code), method,
      issued_at: now, expires_at: now + CODE_TTL_S, attempts: 0, used: 0,
    });
    try {
      await this.send(dev, method, code);
    } catch (e) {
      await challengesRepo.use(this.d.db, otpId); // nobody holds its code
      throw e;
    }
    this.d.log.info("developer sign-in code sent", { developer: dev.id, method });
    return {
      dev_token: "", is_two_factor: true, next_step_url: "/admin/auth/verify", intermediate_token: token,
      two_factor_method: method, otp_id: otpId, otp_issued: String(now), user_id: dev.id,
    };
  }

  private async send(dev: DeveloperRow, method: string, code: string) {
    if (method.includes("email")) {
      const s = await this.settings.emailService();
      await this.settings.email(dev.email, s?.two_factor_subject ?? "Your sign-in code", fillTemplate(s?.two_factor_message ?? "Your sign-in code is $CODE", { CODE: code }));
    }
    if (method.includes("sms")) {
      if (!dev.phone) throw fail("DELIVERY_FAILED", "this developer has no phone number for an SMS code");
      const s = await this.settings.smsService();
      await this.settings.sms(dev.phone, fillTemplate(s?.two_factor_message ?? "Your sign-in code is $CODE", { CODE: code }));
    }
  }

  async verify(intermediateToken: string | null, body: unknown): Promise<string> {
    if (!intermediateToken) throw fail("AUTH_REQUIRED", "send the intermediate_token of the sign-in as ClearBlade-DevToken");
    const b = validate(VerifyBody, body);
    const now = this.now();
    const c = await challengesRepo.get(this.d.db, b.otp_id);
    // hashes compared: what a caller sends does not steer where a comparison stops
    if (!c || c.token_hash !== hashToken(intermediateToken))
      throw fail("BAD_CREDENTIALS", "no pending sign-in has this otp_id and intermediate token");
    if (c.used) throw fail("BAD_CREDENTIALS", "this sign-in code was used already (or could not be sent): sign in again");
    if (c.expires_at <= now) throw fail("BAD_CREDENTIALS", `the sign-in code expired (codes live ${CODE_TTL_S} s): sign in again`);
    if (!(await challengesRepo.takeAttempt(this.d.db, c.otp_id, MAX_ATTEMPTS, now)))
      throw fail("THROTTLED", `too many wrong codes for this sign-in (${MAX_ATTEMPTS}): sign in again for a new code`);
    if (c.code_hash !== this.codeHash(c.otp_id, b.code.trim())) {
      const left = MAX_ATTEMPTS - c.attempts - 1;
      throw fail("BAD_CREDENTIALS", left > 0 ? `wrong code (${left} attempt${left === 1 ? "" : "s"} left)` : "wrong code; that was the last attempt: sign in again for a new code");
    }
    if (!(await challengesRepo.use(this.d.db, c.otp_id))) throw fail("BAD_CREDENTIALS", "this sign-in code was used already: sign in again");
    return c.developer_id;
  }
}
