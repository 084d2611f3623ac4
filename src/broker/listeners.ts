// The broker's listeners: MQTT over TCP and TLS, and over WebSocket and secure WebSocket (Bun's
// own server); each connection is handed to the broker (`accept`), and a SIGHUP's new certificate
// to the TLS ones (reloadTls).
import { readFileSync } from "node:fs";
import net from "node:net";
import tls from "node:tls";
import type { Client } from "aedes";
import { Duplex } from "node:stream";
import type { Config } from "../config.ts";
import { listenTcp } from "./tcp.ts";

export class MqttListeners {
  readonly ports: Record<string, number> = {};
  private readonly servers: { name: string; close(): Promise<void> }[] = [];
  private webSockets: ReturnType<typeof Bun.serve>[] = [];
  /** what a SIGHUP calls to give the TLS listeners a new certificate (reloadTls) */
  private readonly tlsReloads: ((creds: { cert: Buffer; key: Buffer }) => void)[] = [];

  constructor(private readonly config: Config, private readonly accept: (stream: net.Socket | Duplex, ip?: string) => Client) {}

  async start() {
    const c = this.config;
    // plain TCP on Bun's sockets (see tcp.ts); TLS stays on node:tls
    const plain = listenTcp(c.httpHost, c.mqttPort, (conn) => this.accept(conn as unknown as Duplex));
    this.ports["mqtt"] = plain.port;
    this.servers.push({ name: "mqtt", close: async () => plain.stop(true) });
    this.listenWs("mqtt-ws", c.mqttWsPort);
    if (c.tlsCert && c.tlsKey) {
      const creds = { cert: readFileSync(c.tlsCert), key: readFileSync(c.tlsKey) };
      const server = tls.createServer(creds, (s) => this.accept(s));
      await this.listenTcp("mqtt-tls", server, c.mqttTlsPort);
      this.tlsReloads.push((next) => server.setSecureContext(next));
      this.listenWs("mqtt-wss", c.mqttWssPort, creds);
    }
  }

  private listenTcp(name: string, server: net.Server, port: number) {
    return new Promise<void>((res, rej) => {
      server.once("error", rej);
      server.listen(port, this.config.httpHost, () => {
        this.ports[name] = (server.address() as net.AddressInfo).port;
        this.servers.push({ name, close: () => new Promise((r) => server.close(() => r())) });
        res();
      });
    });
  }

  /** MQTT over WebSocket (path /mqtt, subprotocol "mqtt") on Bun's own WebSocket server. */
  private listenWs(name: string, port: number, tlsCreds?: { cert: Buffer; key: Buffer }) {
    type Data = { stream?: Duplex; ip: string; kick?: () => void };
    const options: Parameters<typeof Bun.serve<Data>>[0] = {
      // never share the port with another process (Bun's default, said here as the API's listener says it)
      port, hostname: this.config.httpHost, reusePort: false,
      ...(tlsCreds ? { tls: { cert: tlsCreds.cert, key: tlsCreds.key } } : {}),
      fetch: (req, srv) => {
        if (new URL(req.url).pathname !== "/mqtt") return new Response("not found", { status: 404 });
        const wantsMqtt = (req.headers.get("sec-websocket-protocol") ?? "").split(",").map((p) => p.trim()).find((p) => p === "mqtt" || p === "mqttv3.1");
        const ok = srv.upgrade(req, { data: { ip: srv.requestIP(req)?.address ?? "" }, headers: wantsMqtt ? { "Sec-WebSocket-Protocol": wantsMqtt } : {} });
        return ok ? undefined : new Response("MQTT over WebSocket only", { status: 400 });
      },
      websocket: {
        open: (ws) => {
          const stream = new Duplex({
            read() {},
            write(chunk: Buffer, _enc, cb) { ws.send(chunk); cb(); },
            final(cb) { ws.close(); cb(); },
            destroy(err, cb) { try { ws.close(); } catch { /* gone */ } cb(err); },
          });
          ws.data.stream = stream;
          const client = this.accept(stream, ws.data.ip) as unknown as { _paused: boolean; _parsingBatch: number; _parser: { parse(b: Buffer): void } };
          // aedes reads on 'readable'; bytes that arrive while it is busy with an earlier packet can
          // sit unread until the next message (seen on about 1 in 20 fresh WebSocket clients).
          // After each message, read whatever aedes left, when it is idle.
          ws.data.kick = () => {
            if (!client._paused && client._parsingBatch <= 0 && stream.readableLength > 0) {
              const buf = stream.read() as Buffer | null;
              if (buf) client._parser.parse(buf);
            }
          };
        },
        message: (ws, msg) => {
          ws.data.stream?.push(typeof msg === "string" ? Buffer.from(msg) : Buffer.from(msg));
          setImmediate(() => ws.data.kick?.());
        },
        close: (ws) => { ws.data.stream?.push(null); },
      },
    };
    let server = Bun.serve<Data>(options);
    this.ports[name] = server.port!;
    this.webSockets.push(server);
    if (!tlsCreds) return;
    // Bun cannot change a listening server's certificate: the old server stops listening (it
    // keeps the connections it has until they end, or until the broker stops) and a new one
    // takes the port
    this.tlsReloads.push((next) => {
      const old = server;
      void old.stop(false).then(() => { this.webSockets = this.webSockets.filter((w) => w !== old); });
      server = Bun.serve<Data>({ ...options, port: this.ports[name]!, tls: { cert: next.cert, key: next.key } });
      this.webSockets.push(server);
    });
  }

  /** New certificate and key for the TLS listeners (MQTT over TLS and over secure WebSocket):
   *  new connections get them; those already open keep theirs. */
  reloadTls(creds: { cert: Buffer; key: Buffer }) {
    for (const reload of this.tlsReloads) reload(creds);
  }

  /** Stops taking MQTT over WebSocket (and drops those connections). */
  stopWebSockets() {
    for (const w of this.webSockets) w.stop(true);
    this.webSockets = [];
  }

  async close() {
    await Promise.all(this.servers.map((s) => s.close()));
    this.servers.length = 0;
  }
}
