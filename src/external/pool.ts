// One connector per connection, made on first use and closed when the connection changes, goes
// away, or the server stops.
import type { Logger } from "../core/log.ts";
import type { Connector, Credentials, DbType } from "./connector.ts";
import { couchConnector } from "./couchdb.ts";
import { mongoConnector } from "./mongodb.ts";
import { mssqlConnector, mysqlConnector, postgresConnector } from "./sql.ts";

const FACTORIES: Record<DbType, (c: Credentials) => Connector> = {
  postgres: postgresConnector, mysql: mysqlConnector, mssql: mssqlConnector, mongodb: mongoConnector, couchdb: couchConnector,
};

export class ConnectorPool {
  private readonly open = new Map<string, Connector>();
  constructor(private readonly log: Logger) {}

  get(key: string, type: DbType, c: Credentials): Connector {
    let x = this.open.get(key);
    if (!x) { x = FACTORIES[type](c); this.open.set(key, x); }
    return x;
  }

  /** Closes a connection's connector (after an update or delete). */
  async drop(key: string) {
    const x = this.open.get(key);
    if (!x) return;
    this.open.delete(key);
    await x.close().catch((err) => this.log.warn("external database close failed", { key, err }));
  }

  async dropWhere(pred: (key: string) => boolean) { for (const k of [...this.open.keys()]) if (pred(k)) await this.drop(k); }

  async stop() { await this.dropWhere(() => true); }
}
