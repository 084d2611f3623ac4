// The bounds of MQTT.Client in code services: read by the prelude (prelude/mqtt.ts) and the host
// side (mqtt-clients.ts).
export const MQTT_LIMITS = {
  /** clients one run may open (own broker and external together) */
  clients: 16,
  /** of which to external brokers */
  external: 4,
  /** MQTT.Client objects one run may create at all (refused ones and closed ones count) */
  created: 64,
  /** topic filters subscribed at once, over the run's clients */
  filters: 256,
  /** events waiting for the service */
  queue: 1_000,
  queueBytes: 16 << 20,
  /** one message's payload, either way */
  payloadBytes: 4 << 20,
  /** events one mqtt.next answers with */
  batch: 100,
  batchBytes: 1 << 20,
  /** publishes to an external broker not yet acknowledged (QoS 1/2) or written (QoS 0) */
  inFlight: 1_000,
  connectMs: 10_000,
  /** how long a closing run waits for its publishes under way */
  closeMs: 5_000,
  reconnectMs: 2_000,
};
