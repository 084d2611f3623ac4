// What the platform says of this edge, kept on the edge: its system, its owner's profile and its
// template (stored at every welcome and template change), and what follows from the template:
// the collections whose rows go up and the topics relayed to the platform.
import type { TemplateEntry } from "../../domain/edges.ts";
import { collectionsRepo } from "../../store/collections.ts";
import { developersRepo } from "../../store/developers.ts";
import { syncStateRepo } from "../../store/sync.ts";
import { systemsRepo, type SystemRow } from "../../store/systems.ts";
import { relayFilters, upCollections } from "../assets.ts";
import type { PlatformMessage } from "../protocol.ts";
import type { EdgeSyncDeps } from "./deps.ts";

export class EdgeTemplate {
  entries: TemplateEntry[] = [];

  constructor(private readonly d: EdgeSyncDeps, private readonly systemKey: string) {}

  /** The template stored at the last welcome (rows written before the platform answers, or while
   *  it is unreachable, must reach the outbox too). */
  async restore() {
    const t = await syncStateRepo.get(this.d.db, "template");
    if (t) this.use(JSON.parse(t) as TemplateEntry[]);
    await this.refreshUpCollections();
  }

  /** A welcome: its system, owner, template and clock, with what an incarnation change resets. */
  async welcomed(m: Extract<PlatformMessage, { t: "welcome" }>) {
  await this.d.db.tx(async (tx) => {
    // another incarnation of this edge's record (deleted and made again): what this one
    // knows of the old one's position counts for nothing; the platform sends a full snapshot
    const held = (await syncStateRepo.get(tx, "incarnation")) ?? "";
    if (m.incarnation && held && held !== m.incarnation) {
      await syncStateRepo.set(tx, "cursor", "0");
      await syncStateRepo.set(tx, "snapshot", "");
      await syncStateRepo.set(tx, "failures", "{}");
      this.d.log.warn("the platform holds another incarnation of this edge: starting over", { was: held, now: m.incarnation });
    }
    if (m.incarnation) await syncStateRepo.set(tx, "incarnation", m.incarnation);
    await developersRepo.putProfile(tx, m.owner);
    await systemsRepo.put(tx, m.system as unknown as SystemRow);
    await syncStateRepo.set(tx, "template", JSON.stringify(m.template));
    await syncStateRepo.set(tx, "template_name", m.templateName ?? "");
    this.d.changes.clock.observe(m.hlc);
    await this.d.changes.saveClock(tx);
  });
    this.use(m.template);
    await this.refreshUpCollections();
  }

  /** The template changed while the edge is connected. */
  async changed(m: Extract<PlatformMessage, { t: "template" }>) {
    await syncStateRepo.set(this.d.db, "template", JSON.stringify(m.template));
    await syncStateRepo.set(this.d.db, "template_name", m.templateName ?? "");
    this.use(m.template);
    await this.refreshUpCollections();
  }

  private use(t: TemplateEntry[]) {
    this.entries = t;
    this.d.changes.useTemplate(null, relayFilters(t));
  }

  async refreshUpCollections() {
    const names = (await collectionsRepo.list(this.d.db, this.systemKey)).map((c) => c.name);
    this.d.changes.useTemplate(new Set(upCollections(this.entries, names)), null);
  }
}
