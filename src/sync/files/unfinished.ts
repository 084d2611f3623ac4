// Which peers a sending side has unfinished transfers with, per system, kept in memory: a link
// coming up (thousands at once after a platform restart) reads its transfers only when its peer
// has some, so a herd of links of edges with none reads one query per system, not one per link.
import type { Db } from "../../store/db.ts";
import { fileTransfersRepo } from "../../store/fileTransfers.ts";

/** On a cluster, how long the peers known are trusted before they are read again (a transfer
 *  another node recorded says so by a signal, which can be lost). */
const FRESH_MS = 5_000;

/** Per system, the peers (one read), and how many transfers were recorded since it began. */
interface Known { readAt: number; peers: Promise<Set<string>>; recorded: number }

export class UnfinishedSends {
  private readonly bySystem = new Map<string, Known>();

  constructor(private readonly db: Db, private readonly clustered: boolean) {}

  /** Whether the peer may have unfinished transfers; `none` says its read found none (the next
   *  links read nothing until one is recorded). */
  async of(systemKey: string, edge: string): Promise<{ maybe: boolean; none: () => void }> {
    const k = this.known(systemKey), recorded = k.recorded;
    const peers = await k.peers;
    return { maybe: peers.has(edge), none: () => { if (k.recorded === recorded) peers.delete(edge); } };
  }

  /** A transfer to a peer was recorded (here, or on a cluster by another node). */
  recorded(systemKey: string, edge: string) {
    const k = this.bySystem.get(systemKey);
    if (!k) return;
    k.recorded++;
    k.peers = k.peers.then((p) => p.add(edge));
  }

  private known(systemKey: string): Known {
    const kept = this.bySystem.get(systemKey);
    if (kept && !(this.clustered && Date.now() - kept.readAt > FRESH_MS)) return kept;
    const k: Known = { readAt: Date.now(), peers: fileTransfersRepo.peersWithUnfinished(this.db, systemKey, "send").then((p) => new Set(p)), recorded: 0 };
    k.peers.catch(() => { if (this.bySystem.get(systemKey) === k) this.bySystem.delete(systemKey); });
    this.bySystem.set(systemKey, k);
    return k;
  }
}
