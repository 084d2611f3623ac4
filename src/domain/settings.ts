// Instance settings the platform admin keeps (/admin/settings/*): the security settings
// (developer token lifetime, two-factor sign-in required of every developer) and the services
// sign-in codes go out through (an SMTP server, an SMS gateway). Kept in the settings table, read
// from it when used (rarely: at a developer's sign-in), so every node of a cluster sees a change
// at once. The services' passwords are sealed with the node's secret key.
import { z } from "zod";
import type { Principal } from "../auth/principal.ts";
import type { SecretBox } from "../auth/secrets.ts";
import { fail } from "../core/errors.ts";
import { email, validate } from "../core/validate.ts";
import { type SmtpServer, sendMail } from "../notify/email.ts";
import { type SmsGateway, sendSms } from "../notify/sms.ts";
import { settingsRepo } from "../store/settings.ts";
import type { DomainDeps } from "./deps.ts";

/** ClearBlade's bounds for developer_token_ttl (seconds). */
export const DEV_TOKEN_TTL_MIN = 86_400;
export const DEV_TOKEN_TTL_MAX = 2_592_000;
const TEXT_MAX = 4000;

const KEY = { security: "security", email: "email_service", sms: "sms_service" } as const;

export interface SecuritySettings { developer_token_ttl?: number; two_factor_auth: { enabled: boolean } }

const SecurityBody = z.object({
  developer_token_ttl: z.number().int().min(DEV_TOKEN_TTL_MIN).max(DEV_TOKEN_TTL_MAX).optional(),
  two_factor_auth: z.object({ enabled: z.boolean() }).strict().optional(),
}).strict();

const port = z.union([z.number(), z.string().regex(/^\d+$/, "must be a port number").transform(Number)])
  .pipe(z.number().int().min(1).max(65535));
const text = z.string().max(TEXT_MAX);

/** The services' fields, and what a new service takes for those left out (an update changes
 *  only the fields it sends). */
const EmailFields = {
  host: z.string().min(1).max(253),
  port,
  username: z.string().max(256),
  password: z.string().max(1024),
  from: z.string().min(3).max(320),
  protocol: z.literal("SMTP", { error: "must be 'SMTP' (the only protocol)" }),
  encryption_type: z.enum(["STARTTLS", "TLS", "NONE"], { error: "must be one of STARTTLS, TLS, NONE" }),
  two_factor_subject: text,
  two_factor_message: text.refine((m) => m.includes("$CODE"), "must contain $CODE (where the code goes)"),
  validation_subject: text,
  validation_message: text,
};
const EMAIL_DEFAULTS = {
  username: "", password: "", protocol: "SMTP" as const, encryption_type: "STARTTLS" as const, two_factor_subject: "Your sign-in code",
  two_factor_message: "Your sign-in code is $CODE", validation_subject: "Confirm your email address", validation_message: "Confirm your email address: $LINK",
};
const EmailUpdate = z.object(EmailFields).partial().strict();
const EmailCreate = EmailUpdate.required({ host: true, port: true, from: true });
type EmailService = Required<z.infer<typeof EmailUpdate>>;

const SmsFields = {
  service_name: z.string().max(100),
  url: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }),
  username: z.string().max(256),
  password: z.string().max(1024),
  from: z.string().min(1).max(50),
  two_factor_message: text.refine((m) => m.includes("$CODE"), "must contain $CODE (where the code goes)"),
  validation_message: text,
};
const SMS_DEFAULTS = { service_name: "Twilio", username: "", password: "", two_factor_message: "Your sign-in code is $CODE", validation_message: "Confirm your phone number: $LINK" };
const SmsUpdate = z.object(SmsFields).partial().strict();
const SmsCreate = SmsUpdate.required({ url: true, from: true });
type SmsService = Required<z.infer<typeof SmsUpdate>>;

/** The fields sent, without those left out. */
const sent = <T extends object>(b: T) => Object.fromEntries(Object.entries(b).filter(([, v]) => v !== undefined)) as Partial<T>;

const TestBody = z.object({ recipient: z.string().min(1).max(320) }).strict();

/** What a message carries: the text with $CODE (and $LINK) filled in. */
export const fillTemplate = (template: string, values: Record<string, string>) =>
  template.replace(/\$(CODE|LINK)/g, (m, k: string) => values[k] ?? m);

export class InstanceSettings {
  constructor(private readonly d: DomainDeps, private readonly secrets: SecretBox) {}

  private requireAdmin(p: Principal) {
    if (p.kind !== "developer") throw fail("DEVELOPER_ONLY", "this operation needs a developer token");
    if (!p.admin) throw fail("ADMIN_ONLY", "instance settings are the platform admin's");
  }

  private async read<T>(key: string): Promise<T | undefined> {
    const v = await settingsRepo.get(this.d.db, key);
    return v === undefined ? undefined : (JSON.parse(v) as T);
  }

  // ---- security ---------------------------------------------------------------------------------

  async security(): Promise<SecuritySettings> {
    return (await this.read<SecuritySettings>(KEY.security)) ?? { two_factor_auth: { enabled: false } };
  }

  /** The lifetime of a new developer token: the admin's setting, else --dev-token-ttl. */
  async developerTokenTtl(): Promise<number> {
    return (await this.security()).developer_token_ttl ?? this.d.config.devTokenTtl;
  }

  private async securityToWire() {
    const s = await this.security();
    return { developer_token_ttl: s.developer_token_ttl ?? this.d.config.devTokenTtl, two_factor_auth: { enabled: s.two_factor_auth.enabled } };
  }

  async getSecurity(p: Principal) {
    this.requireAdmin(p);
    return this.securityToWire();
  }

  async putSecurity(p: Principal, body: unknown) {
    this.requireAdmin(p);
    const b = validate(SecurityBody, body);
    const cur = await this.security();
    const next: SecuritySettings = { ...cur, ...(b.developer_token_ttl !== undefined ? { developer_token_ttl: b.developer_token_ttl } : {}), two_factor_auth: b.two_factor_auth ?? cur.two_factor_auth };
    // every developer then signs in with a code by email (unless they chose SMS): without a way to
    // send it, nobody could sign in
    if (next.two_factor_auth.enabled && !cur.two_factor_auth.enabled && !(await this.emailService()))
      throw fail("INVALID_ARGUMENT", "two_factor_auth: configure the email service (/admin/settings/email-service) before requiring two-factor sign-in");
    await settingsRepo.put(this.d.db, KEY.security, JSON.stringify(next));
    return this.securityToWire();
  }

  // ---- email service ----------------------------------------------------------------------------

  async emailService(): Promise<EmailService | undefined> {
    return this.readService<EmailService>(KEY.email);
  }

  private emailToWire(s: EmailService) {
    const { password, ...rest } = s;
    return { ...rest, port: String(s.port), password_set: password !== "" };
  }

  /** A service's settings, its password kept sealed (never stored in clear). */
  private async readService<T extends { password: string }>(key: string): Promise<T | undefined> {
    const s = await this.read<T>(key);
    return s && { ...s, password: s.password ? this.secrets.open(s.password) : "" };
  }

  private async saveService(key: string, s: { password: string }) {
    await settingsRepo.put(this.d.db, key, JSON.stringify({ ...s, password: s.password ? this.secrets.seal(s.password) : "" }));
  }

  async getEmail(p: Principal) {
    this.requireAdmin(p);
    const s = await this.emailService();
    if (!s) throw fail("NOT_FOUND", "the email service is not configured");
    return this.emailToWire(s);
  }

  async createEmail(p: Principal, body: unknown) {
    this.requireAdmin(p);
    const b = validate(EmailCreate, body);
    if (await this.emailService()) throw fail("ALREADY_EXISTS", "the email service is configured already: change it with PUT");
    await this.saveService(KEY.email, { ...EMAIL_DEFAULTS, ...sent(b) } as EmailService);
    return { success: true };
  }

  async updateEmail(p: Principal, body: unknown) {
    this.requireAdmin(p);
    const b = validate(EmailUpdate, body);
    const cur = await this.emailService();
    if (!cur) throw fail("NOT_FOUND", "the email service is not configured: create it with POST");
    await this.saveService(KEY.email, { ...cur, ...sent(b) });
    return { success: true };
  }

  async deleteEmail(p: Principal) {
    this.requireAdmin(p);
    if ((await this.security()).two_factor_auth.enabled) throw fail("INVALID_ARGUMENT", "two-factor sign-in is required of every developer: turn that off (/admin/settings/security) before removing the email service");
    await settingsRepo.delete(this.d.db, KEY.email);
    return { success: true };
  }

  /** Sends a message through the email service; throws a 503 saying why it could not. */
  async email(to: string, subject: string, message: string): Promise<void> {
    const s = await this.emailService();
    if (!s) throw fail("DELIVERY_FAILED", "the email service is not configured (/admin/settings/email-service)");
    const server: SmtpServer = { host: s.host, port: s.port, username: s.username, password: s.password, from: s.from, encryption: s.encryption_type };
    try { await sendMail(server, { to, subject, text: message }); } catch (e) {
      this.d.log.warn("email not sent", { host: s.host, port: s.port, err: (e as Error).message });
      throw fail("DELIVERY_FAILED", `the email service could not send the message: ${(e as Error).message}`);
    }
  }

  async testEmail(p: Principal, body: unknown) {
    this.requireAdmin(p);
    const b = validate(TestBody, body);
    validate(email, b.recipient, "recipient");
    await this.email(b.recipient, "Outpost test message", "This is a test message from Outpost's email service settings.");
    return { success: true };
  }

  // ---- SMS service ------------------------------------------------------------------------------

  async smsService(): Promise<SmsService | undefined> {
    return this.readService<SmsService>(KEY.sms);
  }

  private smsToWire(s: SmsService) {
    const { password, ...rest } = s;
    return { ...rest, password_set: password !== "" };
  }

  async getSms(p: Principal) {
    this.requireAdmin(p);
    const s = await this.smsService();
    if (!s) throw fail("NOT_FOUND", "the SMS service is not configured");
    return this.smsToWire(s);
  }

  async createSms(p: Principal, body: unknown) {
    this.requireAdmin(p);
    const b = validate(SmsCreate, body);
    if (await this.smsService()) throw fail("ALREADY_EXISTS", "the SMS service is configured already: change it with PUT");
    await this.saveService(KEY.sms, { ...SMS_DEFAULTS, ...sent(b) } as SmsService);
    return { success: true };
  }

  async updateSms(p: Principal, body: unknown) {
    this.requireAdmin(p);
    const b = validate(SmsUpdate, body);
    const cur = await this.smsService();
    if (!cur) throw fail("NOT_FOUND", "the SMS service is not configured: create it with POST");
    await this.saveService(KEY.sms, { ...cur, ...sent(b) });
    return { success: true };
  }

  async deleteSms(p: Principal) {
    this.requireAdmin(p);
    await settingsRepo.delete(this.d.db, KEY.sms);
    return { success: true };
  }

  /** Sends a text through the SMS gateway; throws a 503 saying why it could not. */
  async sms(to: string, message: string): Promise<void> {
    const s = await this.smsService();
    if (!s) throw fail("DELIVERY_FAILED", "the SMS service is not configured (/admin/settings/sms-service)");
    const gateway: SmsGateway = { url: s.url, username: s.username, password: s.password, from: s.from };
    try { await sendSms(gateway, to, message); } catch (e) {
      this.d.log.warn("SMS not sent", { err: (e as Error).message });
      throw fail("DELIVERY_FAILED", `the SMS service could not send the message: ${(e as Error).message}`);
    }
  }

  async testSms(p: Principal, body: unknown) {
    this.requireAdmin(p);
    const b = validate(TestBody, body);
    await this.sms(b.recipient, "This is a test message from Outpost's SMS service settings.");
    return { success: true };
  }
}
