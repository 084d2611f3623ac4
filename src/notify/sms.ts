// Text messages through the HTTP gateway the platform admin configured
// (/admin/settings/sms-service): ClearBlade's is Twilio's Messages API, a form POST of To, From and
// Body with HTTP basic auth (account SID and auth token), which other gateways copy.
export interface SmsGateway { url: string; username: string; password: string; from: string }

const SMS_TIMEOUT_MS = 15_000;

/** Sends one message; throws with the gateway's answer when it is refused. */
export async function sendSms(gateway: SmsGateway, to: string, text: string): Promise<void> {
  const res = await fetch(gateway.url, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      ...(gateway.username ? { authorization: `Basic ${Buffer.from(`${gateway.username}:${gateway.password}`).toString("base64")}` } : {}),
    },
    body: new URLSearchParams({ To: to, From: gateway.from, Body: text }).toString(),
    signal: AbortSignal.timeout(SMS_TIMEOUT_MS),
    redirect: "error",
  });
  if (!res.ok) throw new Error(`the SMS gateway answered ${res.status}: ${(await res.text()).slice(0, 200)}`);
}
