// Developer two-factor challenges in-process, on a clock of the test's own: a code dies when its
// time is up, is good once, and the challenge dies after MAX_ATTEMPTS wrong codes; a code is not
// stored as itself.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type App, start } from "../../../src/app.ts";
import { SecretBox } from "../../../src/auth/secrets.ts";
import { loadConfig } from "../../../src/config.ts";
import type { InstanceSettings } from "../../../src/domain/settings.ts";
import { CHALLENGE_WINDOW_S, CODE_TTL_S, MAX_ATTEMPTS, MAX_CHALLENGES, TwoFactor } from "../../../src/domain/twoFactor.ts";
import { developersRepo, type DeveloperRow } from "../../../src/store/developers.ts";
import { challengesRepo } from "../../../src/store/twoFactor.ts";

let app: App;
let tf: TwoFactor;
let dev: DeveloperRow;
let now = 1_000_000;
const sent: string[] = [];

const err = (p: Promise<unknown>) => p.then(() => null, (e) => ({ code: e?.kind?.code as number, detail: String(e?.detail ?? e) }));

beforeAll(async () => {
  app = await start(loadConfig(["--db", ":memory:", "--http-port", "0", "--log-level", "silent"]));
  await app.services.developers.register({ email: "tf@example.com", password: "pw" });
  dev = { ...(await developersRepo.byEmail(app.db, "tf@example.com"))!, two_factor_enabled: 1, two_factor_method: "email" };
  // the settings as far as challenges use them: an email service that hands the message to the test
  const settings = {
    security: async () => ({ two_factor_auth: { enabled: false } }),
    emailService: async () => ({ two_factor_subject: "s", two_factor_message: "code $CODE" }),
    email: async (_to: string, _subject: string, message: string) => { sent.push(message.slice("code ".length)); },
  } as unknown as InstanceSettings;
  tf = new TwoFactor({ db: app.db, log: app.log } as never, settings, new SecretBox(Buffer.alloc(32, 7)), () => now);
});
afterAll(() => app.stop());

async function challenge() {
  const ch = (await tf.challengeFor(dev))!;
  return { ch, code: sent.at(-1)! };
}

test("the code is stored neither as itself nor as a plain hash of it", async () => {
  const { ch, code } = await challenge();
  const row = (await challengesRepo.get(app.db, ch.otp_id))!;
  expect(JSON.stringify(row)).not.toContain(code);
  expect(row.code_hash).not.toContain(code);
  expect(row.token_hash).not.toBe(ch.intermediate_token);
  expect(row.expires_at).toBe(now + CODE_TTL_S);
});

test("a code is good until its time is up, not after", async () => {
  const { ch, code } = await challenge();
  now += CODE_TTL_S - 1;
  expect(await tf.verify(ch.intermediate_token, { code, otp_id: ch.otp_id })).toBe(dev.id);
  const late = await challenge();
  now += CODE_TTL_S;
  expect(await err(tf.verify(late.ch.intermediate_token, { code: late.code, otp_id: late.ch.otp_id }))).toMatchObject({ code: 203, detail: expect.stringContaining("expired") });
});

test("good once", async () => {
  const { ch, code } = await challenge();
  expect(await tf.verify(ch.intermediate_token, { code, otp_id: ch.otp_id })).toBe(dev.id);
  expect(await err(tf.verify(ch.intermediate_token, { code, otp_id: ch.otp_id }))).toMatchObject({ code: 203, detail: expect.stringContaining("used") });
});

test(`${MAX_ATTEMPTS} wrong codes at once (concurrent) kill the challenge; the right one is refused after`, async () => {
  const { ch, code } = await challenge();
  const wrong = code === "000000" ? "000001" : "000000";
  const answers = await Promise.all(Array.from({ length: MAX_ATTEMPTS + 3 }, () => err(tf.verify(ch.intermediate_token, { code: wrong, otp_id: ch.otp_id }))));
  expect(answers.filter((a) => a?.code === 203).length).toBe(MAX_ATTEMPTS);
  expect(answers.filter((a) => a?.code === 429).length).toBe(3);
  expect(await err(tf.verify(ch.intermediate_token, { code, otp_id: ch.otp_id }))).toMatchObject({ code: 429 });
});

test("a developer without two-factor, not required of all: no challenge", async () => {
  expect(await tf.challengeFor({ ...dev, two_factor_enabled: 0 })).toBeNull();
});

test(`at most ${MAX_CHALLENGES} codes sent in ${CHALLENGE_WINDOW_S} s, then again after`, async () => {
  now += 10 * CHALLENGE_WINDOW_S;
  for (let i = 0; i < MAX_CHALLENGES; i++) await challenge();
  const before = sent.length;
  expect(await err(tf.challengeFor(dev))).toMatchObject({ code: 429 });
  expect(sent.length).toBe(before);
  now += CHALLENGE_WINDOW_S + 1;
  expect((await tf.challengeFor(dev))?.is_two_factor).toBe(true);
});
