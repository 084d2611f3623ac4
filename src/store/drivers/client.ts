// @libsql/client, for `libsql://`, `http(s)://` and `ws(s)://` servers (and for `file:` when
// forced). The client is made by openDb (src/store/db.ts) and handed in.
import type { Client, InValue, Transaction } from "@libsql/client";
import { sqlite } from "../../core/dialect.ts";
import type { Db, Executor, LatencySink, Row, RunResult, Stmt } from "./contract.ts";
import { fixValue, toArgs, TxGate } from "./shared.ts";

function rowsOf(rs: { columns: string[]; rows: ArrayLike<unknown>[] }): Row[] {
  const cols = rs.columns;
  return rs.rows.map((r) => {
    const o: Row = {};
    for (let i = 0; i < cols.length; i++) {
      o[cols[i]!] = fixValue(r[i]);
    }
    return o;
  });
}

class ClientExecutor implements Executor {
  readonly dialect = sqlite;
  latency: LatencySink | null = null;
  constructor(protected readonly c: Client | Transaction) {}
  private async execute(sql: string, args: readonly unknown[] | undefined) {
    const t0 = this.latency ? performance.now() : 0;
    const r = await this.c.execute({ sql, args: toArgs(args) as InValue[] });
    this.latency?.observe((performance.now() - t0) / 1000);
    return r;
  }
  async all<T = Row>(sql: string, args?: readonly unknown[]): Promise<T[]> {
    return rowsOf(await this.execute(sql, args)) as T[];
  }
  async get<T = Row>(sql: string, args?: readonly unknown[]): Promise<T | undefined> {
    return (await this.all<T>(sql, args))[0];
  }
  async run(sql: string, args?: readonly unknown[]): Promise<RunResult> {
    const r = await this.execute(sql, args);
    return { changes: r.rowsAffected, lastInsertRowid: Number(r.lastInsertRowid ?? 0) };
  }
  async batch(stmts: readonly Stmt[]): Promise<RunResult[]> {
    if ("commit" in this.c) {
      const out: RunResult[] = [];
      for (const s of stmts) out.push(await this.run(s.sql, s.args));
      return out;
    }
    const rs = await (this.c as Client).batch(stmts.map((s) => ({ sql: s.sql, args: toArgs(s.args) as InValue[] })), "write");
    return rs.map((r) => ({ changes: r.rowsAffected, lastInsertRowid: Number(r.lastInsertRowid ?? 0) }));
  }
}

/** @libsql/client: transactions (and writes outside them) are serialised through one gate, since
 *  the client gives each transaction its own connection and concurrent writers would meet
 *  SQLITE_BUSY; reads go straight through. */
export class ClientDb extends ClientExecutor implements Db {
  readonly driver = "client" as const;
  private readonly gate = new TxGate<ClientExecutor>();
  constructor(readonly url: string, private readonly client: Client) { super(client); }

  override all<T = Row>(sql: string, args?: readonly unknown[]) { const t = this.gate.current(); return t ? t.all<T>(sql, args) : super.all<T>(sql, args); }
  override get<T = Row>(sql: string, args?: readonly unknown[]) { const t = this.gate.current(); return t ? t.get<T>(sql, args) : super.get<T>(sql, args); }
  override async run(sql: string, args?: readonly unknown[]) {
    const t = this.gate.current();
    if (t) return t.run(sql, args);
    await this.gate.idle();
    return super.run(sql, args);
  }
  override async batch(stmts: readonly Stmt[]) {
    const t = this.gate.current();
    if (t) return t.batch(stmts);
    await this.gate.idle();
    return super.batch(stmts);
  }

  async tx<T>(fn: (tx: Executor) => Promise<T>): Promise<T> {
    const outer = this.gate.current();
    if (outer) return fn(outer);
    let t: Transaction | undefined;
    return this.gate.run(
      async () => { t = await this.client.transaction("write"); return Object.assign(new ClientExecutor(t), { latency: this.latency }); },
      fn,
      async () => { await t!.commit(); t!.close(); },
      async () => { if (!t!.closed) await t!.rollback().catch(() => {}); t!.close(); },
    );
  }

  settled(): Promise<void> { return this.gate.drained(); }
  async close(): Promise<void> { await this.gate.drained(); this.client.close(); }
}
