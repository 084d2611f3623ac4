// Runs timers: a tick at the start of every second fires each due timer's service (a timer without
// one publishes on `$timer/<name>` instead, as ClearBlade's do) and moves it to its next time. The next time counts from the firing, so after a restart (or any pause) a timer
// fires once and continues at its frequency: never more often than asked, no catch-up bursts.
import type { Principal } from "../auth/principal.ts";
import type { Logger } from "../core/log.ts";
import type { CodeEngine } from "../code/engine.ts";
import type { Systems } from "../domain/systems.ts";
import type { Triggers } from "../domain/triggers.ts";
import type { TriggerBacklog } from "./backlog.ts";

const TICK_SLACK_MS = 100;

export class TimerScheduler {
  private task: { stop(): void } | null = null;
  private ticking = false;
  private stopped = false;
  /** when ticking began (0 until then) */
  private since = 0;
  fired = 0;

  /** `publish`: a message from the platform (or edge) itself, for timers without a service;
   *  `backlog`: where a run waits while its system's code queue is full (the triggers'), rather
   *  than being refused */
  constructor(private readonly triggers: Triggers, private readonly systems: Systems, private readonly engine: CodeEngine, private readonly log: Logger,
    private readonly publish: (systemKey: string, topic: string, payload: Buffer) => Promise<void> = async () => {}, private readonly backlog?: TriggerBacklog) {}

  start() {
    // ticks begin once code can run: a first run that waited for the code workers to warm up
    // would come late, and the next one early
    this.stopped = false;
    void this.engine.ready().then(() => {
      if (this.stopped) return;
      this.since = Date.now();
      this.task = everySecond(() => { void this.tick(); });
    });
  }

  async tick(now = Date.now()) {
    if (this.ticking) return;
    this.ticking = true;
    try {
      // a tick may come a little before the second it is meant for: count timers due within it
      const due = await this.triggers.dueTimers(now + TICK_SLACK_MS);
      // code workers start with the first run: a timer's run that waited for them would come
      // late and the next one early, so they are started first and the slots counted from then
      if (due.length) { await this.engine.warm(); now = Math.max(now, Date.now()); }
      for (const t of due) {
        const runs = t.runs + 1;
        // the next slot counts from this slot, so ticks' jitter does not add up; after a pause
        // (a restart: due before ticking began) or a run later than a tick's slack (a tick that
        // came while the last one was still busy) it counts from now instead: one run, then the
        // usual pace, never a burst, and never two runs closer than the frequency
        const every = t.frequency * 1000;
        let next: number | null = t.next_run! + every;
        if (next < now + every - TICK_SLACK_MS || t.next_run! < this.since) next = now + every;
        if (t.repeats > 0 && runs >= t.repeats) next = null;
        if (!(await this.triggers.claimFiring(t, next))) continue; // another node fired it
        const system = await this.systems.find(t.system_key);
        if (!system) continue;
        this.fired++;
        if (!t.service_name) {
          void this.publish(t.system_key, `$timer/${t.name}`, Buffer.from(JSON.stringify({ timer: t.name, runs })))
            .catch((err) => this.log.warn("timer message not published", { timer: t.name, err }));
          continue;
        }
        const params = { timer: t.name, runs }, run = (p: Principal) => this.engine.execute(p, t.system_key, t.service_name, params, { internal: true, trigger: "Timer" });
        this.engine.runner(t.system_key, system.owner_id, t)
          .then((p): unknown => this.backlog
            ? this.backlog.add(t.system_key, { trigger: t.name, run: () => run(p), drop: (why) => this.engine.recordUnrun(p, t.system_key, t.service_name, params, "Timer", why) })
            : run(p))
          .catch((err) => this.log.warn("timer run failed", { timer: t.name, err }));
      }
    } catch (err) {
      this.log.error("timer tick failed", { err });
    } finally {
      this.ticking = false;
    }
  }

  stop() { this.stopped = true; this.task?.stop(); this.task = null; }
}

/** Calls fn at the start of every second, a timer set again each time (its lateness does not add
 *  up). A plain timer: a cron library matched every second against a calendar in the process's
 *  time zone (ICU's tables in memory for it), and warned of "missed executions" on a busy machine. */
function everySecond(fn: () => void): { stop(): void } {
  let timer: ReturnType<typeof setTimeout>;
  const arm = () => { timer = setTimeout(() => { arm(); fn(); }, 1000 - (Date.now() % 1000)); };
  arm();
  return { stop: () => clearTimeout(timer) };
}
