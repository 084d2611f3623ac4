// Writes the database refused for want of space, held in memory by the MQTT persistence
// (src/broker/persistence.ts) and written once it takes writes again: retained messages, queued
// packets and inbound QoS 2 packets (lost only if the process stops first).
import type { Logger } from "../core/log.ts";
import { type Db, diskFull } from "../store/db.ts";
import { encodePacket, mqttRepo, type MqttPacket } from "../store/mqtt.ts";

/** How often writes held for a full disk are tried again. */
const HELD_RETRY_MS = 1_000;

export class HeldWrites {
  /** retained messages by topic (null: deleted) */
  readonly retained = new Map<string, MqttPacket | null>();
  /** each client's packets queued after its stored ones */
  readonly queue = new Map<string, MqttPacket[]>();
  /** inbound QoS 2 packets awaiting their PUBREL (short-lived: kept in memory only) */
  readonly incoming = new Map<string, MqttPacket>();
  #timer: ReturnType<typeof setTimeout> | null = null;
  #stopped = false;

  /** `written`: told the clients whose held packets were written (their queues' lengths changed) */
  constructor(private readonly db: Db, private readonly queueLimit: number, private readonly log: Logger | undefined,
    private readonly written: (clients: string[]) => Promise<void>) {}

  /** Holds a queued packet the database refused; past the queue limit the oldest held goes. */
  hold(clientId: string, packet: MqttPacket) {
    let q = this.queue.get(clientId);
    if (!q) this.queue.set(clientId, (q = []));
    q.push({ ...packet });
    if (q.length > this.queueLimit) q.shift();
    this.holding();
  }

  /** Removes and returns the client's held packet with this messageId. */
  unhold(clientId: string, messageId: number): MqttPacket | undefined {
    const q = this.queue.get(clientId);
    const i = q ? q.findIndex((h) => h.messageId === messageId) : -1;
    if (i < 0) return undefined;
    const [p] = q!.splice(i, 1);
    if (q!.length === 0) this.queue.delete(clientId);
    return p;
  }

  /** Something is held: try writing it in a moment (said once per spell of a full disk). */
  holding() {
    if (this.#timer || this.#stopped) return;
    this.log?.warn("mqtt: the disk under the database is full; retained and queued messages are held in memory until it takes writes again");
    this.#retry();
  }

  /** Writes what is held, in one transaction; what was held meanwhile waits for the next try. */
  async #write() {
    const retained = [...this.retained];
    const queues = [...this.queue].map(([id, q]) => [id, [...q]] as const);
    try {
      await this.db.tx(async (tx) => {
        for (const [topic, p] of retained) {
          if (p) await mqttRepo.putRetained(tx, topic, encodePacket(p));
          else await mqttRepo.deleteRetained(tx, topic);
        }
        for (const [id, q] of queues) for (const p of q) { const s = mqttRepo.enqueue(id, p, encodePacket(p)); await tx.run(s.sql, s.args); }
      });
    } catch (e) {
      if (!diskFull(e)) this.log?.error("mqtt: messages held for a full disk could not be written", { err: e });
      this.#retry();
      return;
    }
    for (const [topic, p] of retained) if (this.retained.get(topic) === p) this.retained.delete(topic);
    let packets = 0;
    for (const [id, written] of queues) {
      // the ones written go (a held one acknowledged meanwhile was written all the same: it is
      // sent again at most)
      const q = (this.queue.get(id) ?? []).filter((h) => !written.includes(h));
      if (q.length) this.queue.set(id, q); else this.queue.delete(id);
      packets += written.length;
    }
    await this.written(queues.map(([id]) => id));
    this.log?.info("mqtt: messages held for a full disk are written", { retained: retained.length, queued: packets });
    // what was held meanwhile, in the next try
    this.#timer = null;
    if (this.retained.size || this.queue.size) this.#retry();
  }

  #retry() {
    this.#timer = this.#stopped ? null : setTimeout(() => void this.#write(), HELD_RETRY_MS);
    this.#timer?.unref?.();
  }

  /** Stops trying; the number of messages still held, which are never written. */
  stop(): number {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    return this.retained.size + [...this.queue.values()].reduce((n, q) => n + q.length, 0);
  }
}
