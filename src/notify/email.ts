// Mail out through the SMTP server the platform admin configured (/admin/settings/email-service),
// with nodemailer: plain, STARTTLS (required when chosen) or TLS from the first byte.

export type SmtpEncryption = "STARTTLS" | "TLS" | "NONE";
export interface SmtpServer { host: string; port: number; username: string; password: string; from: string; encryption: SmtpEncryption }
export interface Mail { to: string; subject: string; text: string }

/** How long one delivery may take, connection included. */
const SMTP_TIMEOUT_MS = 15_000;

/** Sends one message; throws with the server's or the network's reason when it is refused. */
export async function sendMail(server: SmtpServer, mail: Mail): Promise<void> {
  // loaded with the first mail: most nodes never send one, and an idle edge would hold its code
  const { default: nodemailer } = await import("nodemailer");
  const transport = nodemailer.createTransport({
    host: server.host, port: server.port,
    secure: server.encryption === "TLS",
    requireTLS: server.encryption === "STARTTLS",
    ignoreTLS: server.encryption === "NONE",
    auth: server.username ? { user: server.username, pass: server.password } : undefined,
    connectionTimeout: SMTP_TIMEOUT_MS, greetingTimeout: SMTP_TIMEOUT_MS, socketTimeout: SMTP_TIMEOUT_MS,
  });
  try {
    await transport.sendMail({ from: server.from, to: mail.to, subject: mail.subject, text: mail.text });
  } finally {
    transport.close();
  }
}
