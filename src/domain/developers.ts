// Developer accounts: registration, sign-in, profile, password, and the platform admin's operations.
import { Port } from "../core/port.ts";
import { z } from "zod";
import { hashPassword, verifyPassword } from "../auth/passwords.ts";
import type { Principal } from "../auth/principal.ts";
import { fail, failFor } from "../core/errors.ts";
import { newKey, newToken, nowIso } from "../core/ids.ts";
import { email, password, validate } from "../core/validate.ts";
import { type DeveloperChanges, type DeveloperRow, developersRepo } from "../store/developers.ts";
import { settingsRepo } from "../store/settings.ts";
import type { TokenRow } from "../store/tokens.ts";
import type { DomainDeps } from "./deps.ts";
import type { SecondFactor } from "./twoFactor.ts";

export const TWO_FACTOR_METHODS = ["email", "sms", "email_sms"] as const;

const RegisterBody = z.object({
  email, password,
  fname: z.string().max(200).default(""),
  lname: z.string().max(200).default(""),
  org: z.string().max(200).default(""),
  key: z.string().optional(),
  phone: z.string().max(50).optional(),
}).strict();

const AuthBody = z.union([
  z.object({ grant_type: z.literal("refresh_token", { error: "grant_type must be 'refresh_token'" }), refresh_token: z.string().min(1), access_token: z.string().min(1) }).strict(),
  z.object({ email: z.string().min(1).optional(), username: z.string().min(1).optional(), password: z.string() }).strict()
    .refine((b) => b.email || b.username, "email (or username) is required"),
]);

const UserInfoBody = z.object({
  fname: z.string().max(200).optional(),
  lname: z.string().max(200).optional(),
  org: z.string().max(200).optional(),
  phone: z.string().max(50).optional(),
  email: email.optional(),
  two_factor_method: z.enum(TWO_FACTOR_METHODS, { error: `must be one of ${TWO_FACTOR_METHODS.join(", ")}` }).optional(),
  two_factor_enabled: z.boolean().optional(),
}).strict();

const PassBody = z.object({ old_password: z.string(), new_password: password }).strict();
const ResetBody = z.object({ email, password: password.optional(), new_password: password.optional() }).strict()
  .refine((b) => b.password || b.new_password, "new_password is required");

export function developerToWire(d: DeveloperRow) {
  return {
    email: d.email, fname: d.fname, lname: d.lname, org: d.org, admin: d.admin === 1,
    creation_date: d.creation_date, last_login: d.last_login ?? "", userid: d.id, user_id: d.id,
    phone: d.phone, two_factor_enabled: d.two_factor_enabled === 1, two_factor_method: d.two_factor_method,
    email_validated: false, phone_validated: false,
  };
}

/** The platform's word on a developer's password (edge mode). */
export type UpstreamVerdict =
  | { verdict: "accepted"; id: string }
  | { verdict: "refused" }
  /** the platform locks this developer out for now (its failed sign-ins) */
  | { verdict: "throttled"; retryAfterS: number }
  | { verdict: "unreachable"; why: string };
export type UpstreamSignIn = (email: string, password: string) => Promise<UpstreamVerdict>;

export class Developers {
  /** `upstream`: on an edge, where the platform checks developers' passwords (attached by the
   *  edge's sync link) */
  /** `secondFactor`: two-factor sign-in and the admin's token lifetime (none: the password alone,
   *  --dev-token-ttl) */
  constructor(private readonly d: DomainDeps, private readonly upstream = new Port<UpstreamSignIn>("upstream sign-in"),
    private readonly secondFactor: SecondFactor | null = null) {
    d.tokens.registerLoader("dev", async (row: TokenRow): Promise<Principal | null> => {
      const dev = await developersRepo.byId(d.db, row.subject_id);
      return dev ? { kind: "developer", id: dev.id, email: dev.email, admin: dev.admin === 1, tokenHash: row.token_hash } : null;
    });
  }

  private tokenTtl(): Promise<number> | number {
    return this.secondFactor?.developerTokenTtl() ?? this.d.config.devTokenTtl;
  }

  private async session(dev: DeveloperRow) {
    const t = await this.d.tokens.issue(this.d.db, "dev", dev.id, null, await this.tokenTtl());
    await developersRepo.touchLogin(this.d.db, dev.id, nowIso());
    return { dev_token: t.token, expires_at: t.expiresAt, refresh_token: t.refreshToken, user_id: dev.id, is_two_factor: false };
  }

  async register(body: unknown) {
    const b = validate(RegisterBody, body);
    const key = this.d.config.registrationKey;
    if (key && b.key !== key) throw fail("BAD_CREDENTIALS", "a valid registration key is required");
    const dev: DeveloperRow = {
      id: newKey(), email: b.email, email_lower: b.email.toLowerCase(), password_hash: await hashPassword(b.password),
      fname: b.fname, lname: b.lname, org: b.org, phone: b.phone ?? "", admin: 0,
      two_factor_enabled: 0, two_factor_method: "", creation_date: nowIso(), last_login: null,
    };
    await this.d.db.tx(async (tx) => {
      if (await developersRepo.byEmail(tx, b.email)) throw fail("ALREADY_EXISTS", `developer '${b.email}' already exists`);
      await developersRepo.insert(tx, dev);
    });
    this.d.log.info("developer registered", { developer: dev.id });
    return this.session(dev);
  }

  async authenticate(body: unknown) {
    const b = validate(AuthBody, body);
    if ("grant_type" in b) {
      const { issued, row } = await this.d.tokens.refresh("dev", b.refresh_token, b.access_token, async () => this.tokenTtl());
      return { dev_token: issued.token, expires_at: issued.expiresAt, refresh_token: issued.refreshToken, user_id: row.subject_id, is_two_factor: false };
    }
    const login = (b.email ?? b.username)!;
    const dev = await developersRepo.byEmail(this.d.db, login);
    const upstream = this.upstream.get();
    if (upstream && dev) return this.authenticateUpstream(upstream, dev, b.password);
    if (!(await verifyPassword(b.password, dev?.password_hash)) || !dev) throw fail("BAD_CREDENTIALS", "invalid email or password");
    return this.signedIn(dev);
  }

  /** The password was right: a token, or the challenge of a second step (domain/twoFactor.ts). */
  private async signedIn(dev: DeveloperRow) {
    return (await this.secondFactor?.challengeFor(dev)) ?? this.session(dev);
  }

  /** The second step: the code of a challenge, with its intermediate token, for a token. */
  async verifyTwoFactor(intermediateToken: string | null, body: unknown) {
    const sf = this.secondFactor;
    if (!sf) throw fail("INVALID_ARGUMENT", "two-factor sign-in is not available on this node");
    const dev = await developersRepo.byId(this.d.db, await sf.verify(intermediateToken, body));
    if (!dev) throw fail("BAD_CREDENTIALS", "developer no longer exists");
    return this.session(dev);
  }

  /** On an edge: the platform never sends a developer's password hash, so the platform checks the
   *  password while it is reachable. The edge then keeps a hash of its own, made here from the
   *  password just accepted, for sign-ins while the platform is not reachable. */
  private async authenticateUpstream(upstream: UpstreamSignIn, dev: DeveloperRow, password: string) {
    const v = await upstream(dev.email, password);
    switch (v.verdict) {
      case "unreachable":
        this.d.log.warn("developer sign-in checked on the edge alone: the platform is not reachable", { why: v.why });
        if (!(await verifyPassword(password, dev.password_hash))) throw fail("BAD_CREDENTIALS", "invalid email or password (the platform is not reachable: only a password already used on this edge works)");
        break;
      // not the edge's own hash: the platform's lockout holds here too
      case "throttled": throw failFor(v.retryAfterS, "THROTTLED", `the platform refuses sign-ins of this developer for now (too many failed attempts); retry in ${v.retryAfterS} s`);
      case "refused": throw fail("BAD_CREDENTIALS", "invalid email or password");
      case "accepted":
        if (v.id !== dev.id) throw fail("BAD_CREDENTIALS", "invalid email or password");
        if (!(await verifyPassword(password, dev.password_hash))) await developersRepo.setPassword(this.d.db, dev.id, await hashPassword(password));
    }
    return this.signedIn(dev);
  }

  async logout(p: Principal) {
    if (p.kind !== "developer") throw fail("DEVELOPER_ONLY", "this operation needs a developer token");
    await this.d.tokens.revoke(this.d.db, p.tokenHash);
    return {};
  }

  private async me(p: Principal): Promise<DeveloperRow> {
    if (p.kind !== "developer") throw fail("DEVELOPER_ONLY", "this operation needs a developer token");
    const dev = await developersRepo.byId(this.d.db, p.id);
    if (!dev) throw fail("INVALID_TOKEN", "developer no longer exists");
    return dev;
  }

  async info(p: Principal) {
    const sf = this.secondFactor;
    return { ...developerToWire(await this.me(p)), two_factor_enabled_instance: sf ? await sf.requiredOfAll() : false };
  }

  async checkAuth(p: Principal) {
    await this.me(p);
    return { is_authenticated: true };
  }

  async updateInfo(p: Principal, body: unknown) {
    const dev = await this.me(p);
    const b = validate(UserInfoBody, body);
    const changes: DeveloperChanges = {};
    if (b.fname !== undefined) changes.fname = b.fname;
    if (b.lname !== undefined) changes.lname = b.lname;
    if (b.org !== undefined) changes.org = b.org;
    if (b.phone !== undefined) changes.phone = b.phone;
    if (b.two_factor_method !== undefined) changes.two_factor_method = b.two_factor_method;
    if (b.two_factor_enabled !== undefined) changes.two_factor_enabled = b.two_factor_enabled ? 1 : 0;
    if (b.email !== undefined && b.email.toLowerCase() !== dev.email_lower) { changes.email = b.email; changes.email_lower = b.email.toLowerCase(); }
    if ((changes.two_factor_enabled === 1 || (dev.two_factor_enabled && changes.two_factor_enabled === undefined)) &&
        !(changes.two_factor_method ?? dev.two_factor_method))
      throw fail("INVALID_ARGUMENT", `two_factor_method: set one of ${TWO_FACTOR_METHODS.join(", ")} to enable two-factor authentication`);
    // turned on (or its method changed): its codes must be able to reach the developer
    const enabled = changes.two_factor_enabled ?? dev.two_factor_enabled;
    if (enabled === 1 && (changes.two_factor_enabled === 1 || changes.two_factor_method !== undefined || changes.phone !== undefined))
      await this.secondFactor?.checkCanEnable(changes.two_factor_method ?? dev.two_factor_method, changes.phone ?? dev.phone);
    await this.d.db.tx(async (tx) => {
      if (changes.email_lower && (await developersRepo.byEmail(tx, changes.email_lower))) throw fail("ALREADY_EXISTS", `developer '${b.email}' already exists`);
      await developersRepo.update(tx, dev.id, changes);
    });
    this.d.tokens.forgetSubject("developer", dev.id);
    return developerToWire((await developersRepo.byId(this.d.db, dev.id))!);
  }

  /** Changes the caller's password; their other sessions end. */
  async changePassword(p: Principal, body: unknown) {
    const dev = await this.me(p);
    const b = validate(PassBody, body);
    if (!(await verifyPassword(b.old_password, dev.password_hash))) throw fail("BAD_CREDENTIALS", "old_password is wrong");
    const hash = await hashPassword(b.new_password);
    await this.d.db.tx(async (tx) => {
      await developersRepo.setPassword(tx, dev.id, hash);
      await this.d.tokens.revokeSubject(tx, "dev", dev.id, [p.tokenHash]);
    });
    return {};
  }

  private requireAdmin(p: Principal) {
    if (p.kind !== "developer") throw fail("DEVELOPER_ONLY", "this operation needs a developer token");
    if (!p.admin) throw fail("ADMIN_ONLY", "this operation needs a platform admin");
  }

  /** Platform admin: sets another developer's password and ends their sessions. */
  async resetPassword(p: Principal, body: unknown) {
    this.requireAdmin(p);
    const b = validate(ResetBody, body);
    const dev = await developersRepo.byEmail(this.d.db, b.email);
    if (!dev) throw fail("NOT_FOUND", `developer '${b.email}' does not exist`);
    const hash = await hashPassword((b.new_password ?? b.password)!);
    await this.d.db.tx(async (tx) => {
      await developersRepo.setPassword(tx, dev.id, hash);
      await this.d.tokens.revokeSubject(tx, "dev", dev.id);
    });
    return {};
  }

  /** The platform license key: generated on first request, then always the same. */
  async licenseKey(p: Principal) {
    this.requireAdmin(p);
    return { pkey: await settingsRepo.getOrInit(this.d.db, "license_key", newToken()) };
  }

  /** Creates (or promotes) the platform admin given on the command line. Idempotent. */
  async bootstrapAdmin(adminEmail: string, adminPassword: string) {
    const existing = await developersRepo.byEmail(this.d.db, adminEmail);
    if (existing) {
      if (!existing.admin) await developersRepo.setAdmin(this.d.db, existing.id, true);
      return;
    }
    await developersRepo.insert(this.d.db, {
      id: newKey(), email: adminEmail, email_lower: adminEmail.toLowerCase(), password_hash: await hashPassword(adminPassword),
      fname: "Platform", lname: "Admin", org: "", admin: 1, creation_date: nowIso(),
    });
    this.d.log.info("platform admin created", { email: adminEmail });
  }
}
