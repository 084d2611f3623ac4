// Reading retained messages by topic filter, a range of the topic index at a time, and the MQTT
// topic matching it needs (src/broker/persistence.ts serves them to aedes).
import type { Db } from "../store/db.ts";
import { mqttRepo, type RetainedRow } from "../store/mqtt.ts";

/** [MQTT-4.7.2-1] at level `root`: whether a filter (split on "/") starting there with a wildcard
 *  meets a topic whose level there starts with "$". */
export function dollarBlocked(filter: string[], topic: string, root: number): boolean {
  const f = filter[root];
  if (f !== "+" && f !== "#") return false;
  let at = 0;
  for (let i = 0; i < root; i++) { at = topic.indexOf("/", at) + 1; if (at === 0) return false; }
  return topic.charCodeAt(at) === 36;
}

/** Whether an MQTT topic filter (split on "/") matches a topic. */
export function matches(filter: string[], topic: string): boolean {
  const t = topic.split("/");
  for (let i = 0; i < filter.length; i++) {
    const f = filter[i];
    if (f === "#") return true; // also matches the parent level: "a/#" matches "a"
    if (i >= t.length || (f !== "+" && f !== t[i])) return false;
  }
  return filter.length === t.length;
}

/** Reads only the rows under the pattern's literal prefix (up to its first wildcard): one range
 *  of the topic index, so "<systemKey>/a/+" never reads another system's messages. */
export async function* retainedRows(db: Db, pattern: string, root: number, page: number): AsyncGenerator<RetainedRow> {
  const filter = pattern.split("/");
  const k = filter.findIndex((l) => l === "+" || l === "#");
  if (k === -1) {
    const row = await mqttRepo.retained(db, pattern);
    if (row) yield row;
    return;
  }
  let from = "", to: string | null = null;
  if (k > 0) {
    const prefix = filter.slice(0, k).join("/");
    if (filter[k] === "#") {
      const row = await mqttRepo.retained(db, prefix);
      if (row && matches(filter, row.topic)) yield row;
    }
    // "0" is the character after "/": [prefix/, prefix0) holds exactly the topics below prefix.
    from = prefix + "/";
    to = prefix + "0";
  }
  for (let after: string | null = null; ;) {
    const rows = await mqttRepo.retainedRange(db, from, to, after, page);
    for (const r of rows) {
      // [MQTT-4.7.2-1] a filter starting with a wildcard does not match topics starting with "$".
      if (k === root && dollarBlocked(filter, r.topic, k)) continue;
      if (matches(filter, r.topic)) yield r;
    }
    if (rows.length < page) return;
    after = rows[rows.length - 1]!.topic;
  }
}
