// The SQL databases (postgres with `pg`, mysql/MariaDB with `mysql2`, SQL Server with `mssql`):
// pooled connections, `$n` positional arguments in each dialect's form, a time limit per statement.
import type mssql from "mssql";
import type pg from "pg";
import { fail } from "../core/errors.ts";
import { type Connector, type Credentials, type DataResult, databaseError, positional, sqlOperation } from "./connector.ts";
import { sqlTable } from "./tables.ts";

// The drivers load when a connection of their kind is first made, each from a part of the binary
// of its own: together they are most of its code, which a start would otherwise read and hold
// in memory, and most deployments use one of them or none.
const drivers = {
  pg: () => import("pg").then((m) => m.default),
  mysql: () => import("mysql2/promise").then((m) => m.default),
  mssql: () => import("mssql").then((m) => m.default),
};

/** A driver's pool on its way: a failure to make it waits for the first statement, which reports it. */
function pending<T>(p: Promise<T>): Promise<T> {
  p.catch(() => {});
  return p;
}

const POOL_MAX = 5;
const CONNECT_TIMEOUT_MS = 5_000;

const timedOut = (ms: number) => fail("EXTERNAL_DB", `the statement did not finish within ${ms / 1000} s and was cancelled`);

export function postgresConnector(c: Credentials): Connector {
  const pool = pending(drivers.pg().then((driver) => {
    const p = new driver.Pool({
      host: c.address, port: Number(c.port), user: c.user, password: c.password, database: c.dbname, max: POOL_MAX,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS, idleTimeoutMillis: 30_000, ...(c.tls ? { ssl: { rejectUnauthorized: false } } : {}),
    });
    p.on("error", () => { /* an idle client's error: the next query reconnects */ });
    return p;
  }));
  const perform = async (op: unknown[], timeoutMs: number): Promise<DataResult> => {
    const { sql, args } = positional("postgres", ...splitOp(op));
    let client: pg.PoolClient;
    try { client = await (await pool).connect(); } catch (e) { throw databaseError(e, "could not connect"); }
    try {
      // statement_timeout makes the server cancel the statement itself
      await client.query(`SET statement_timeout = ${Math.max(1, Math.floor(timeoutMs))}`);
      const r = await client.query({ text: sql, values: args });
      const last = Array.isArray(r) ? r[r.length - 1] : r;
      return last.rows?.length || last.command === "SELECT" ? { Data: last.rows, Total: last.rows.length } : { Data: [], Total: last.rowCount ?? 0 };
    } catch (e) {
      if ((e as { code?: string }).code === "57014") throw timedOut(timeoutMs);
      throw databaseError(e);
    } finally {
      client.release();
    }
  };
  const transaction = async (statements: unknown[][], timeoutMs: number): Promise<void> => {
    const parsed = statements.map((op) => positional("postgres", ...splitOp(op)));
    let client: pg.PoolClient;
    try { client = await (await pool).connect(); } catch (e) { throw databaseError(e, "could not connect"); }
    try {
      await client.query(`SET statement_timeout = ${Math.max(1, Math.floor(timeoutMs))}`);
      await client.query("BEGIN");
      for (const { sql, args } of parsed) await client.query({ text: sql, values: args });
      await client.query("COMMIT");
    } catch (e) {
      await client.query("ROLLBACK").catch(() => {});
      if ((e as { code?: string }).code === "57014") throw timedOut(timeoutMs);
      throw databaseError(e, "the transaction was rolled back");
    } finally {
      client.release();
    }
  };
  return { perform, transaction, table: sqlTable("postgres", perform), close: () => pool.then((p) => p.end(), () => {}) };
}

export function mysqlConnector(c: Credentials): Connector {
  const pool = pending(drivers.mysql().then((driver) => driver.createPool({
    host: c.address, port: Number(c.port), user: c.user, password: c.password, database: c.dbname, connectionLimit: POOL_MAX,
    connectTimeout: CONNECT_TIMEOUT_MS, dateStrings: false, supportBigNumbers: true, bigNumberStrings: true, multipleStatements: false,
  })));
  const perform = async (op: unknown[], timeoutMs: number): Promise<DataResult> => {
    const { sql, args } = positional("mysql", ...splitOp(op));
    try {
      const [rows] = await (await pool).query({ sql, values: args, timeout: timeoutMs });
      if (Array.isArray(rows)) return { Data: rows as unknown[], Total: rows.length };
      return { Data: [], Total: (rows as { affectedRows?: number }).affectedRows ?? 0 };
    } catch (e) {
      const code = (e as { code?: string }).code;
      if (code === "PROTOCOL_SEQUENCE_TIMEOUT") throw timedOut(timeoutMs);
      if (code === "ECONNREFUSED" || code === "ER_ACCESS_DENIED_ERROR" || code === "ETIMEDOUT" || code === "ENOTFOUND" || code === "ER_BAD_DB_ERROR") throw databaseError(e, "could not connect");
      throw databaseError(e);
    }
  };
  const transaction = async (statements: unknown[][], timeoutMs: number): Promise<void> => {
    const parsed = statements.map((op) => positional("mysql", ...splitOp(op)));
    let conn: Awaited<ReturnType<Awaited<typeof pool>["getConnection"]>>;
    try { conn = await (await pool).getConnection(); } catch (e) { throw databaseError(e, "could not connect"); }
    try {
      await conn.beginTransaction();
      for (const { sql, args } of parsed) await conn.query({ sql, values: args, timeout: timeoutMs });
      await conn.commit();
    } catch (e) {
      await conn.rollback().catch(() => {});
      if ((e as { code?: string }).code === "PROTOCOL_SEQUENCE_TIMEOUT") throw timedOut(timeoutMs);
      throw databaseError(e, "the transaction was rolled back");
    } finally {
      conn.release();
    }
  };
  return { perform, transaction, table: sqlTable("mysql", perform), close: () => pool.then((p) => p.end(), () => {}) };
}

export function mssqlConfig(c: Credentials): mssql.config {
  return {
    server: c.address, port: Number(c.port), user: c.user, password: c.password, database: c.dbname,
    pool: { max: POOL_MAX, min: 0, idleTimeoutMillis: 30_000 }, connectionTimeout: CONNECT_TIMEOUT_MS,
    options: { encrypt: c.encryption === "true", trustServerCertificate: c.encryption !== "true" },
  };
}

export function mssqlConnector(c: Credentials): Connector {
  const pool = pending(drivers.mssql().then((driver) => new driver.ConnectionPool(mssqlConfig(c))));
  let connecting: Promise<mssql.ConnectionPool> | null = null;
  const ready = () => (connecting ??= pool.then((p) => p.connect()).catch((e) => { connecting = null; throw databaseError(e, "could not connect"); }));
  const perform = async (op: unknown[], timeoutMs: number): Promise<DataResult> => {
    const { sql, args } = positional("mssql", ...splitOp(op));
    const p = await ready();
    const req = p.request();
    (req as unknown as { timeout: number }).timeout = timeoutMs;
    args.forEach((a, i) => req.input(`p${i + 1}`, a as never));
    try {
      const r = await req.query(sql);
      return r.recordset ? { Data: r.recordset, Total: r.recordset.length } : { Data: [], Total: r.rowsAffected.reduce((x, y) => x + y, 0) };
    } catch (e) {
      if ((e as { code?: string }).code === "ETIMEOUT") throw timedOut(timeoutMs);
      throw databaseError(e);
    }
  };
  const transaction = async (statements: unknown[][], timeoutMs: number): Promise<void> => {
    const parsed = statements.map((op) => positional("mssql", ...splitOp(op)));
    const tx = (await ready()).transaction();
    await tx.begin().catch((e) => { throw databaseError(e, "could not begin a transaction"); });
    try {
      for (const { sql, args } of parsed) {
        const req = tx.request();
        (req as unknown as { timeout: number }).timeout = timeoutMs;
        args.forEach((a, i) => req.input(`p${i + 1}`, a as never));
        await req.query(sql);
      }
      await tx.commit();
    } catch (e) {
      await tx.rollback().catch(() => {});
      if ((e as { code?: string }).code === "ETIMEOUT") throw timedOut(timeoutMs);
      throw databaseError(e, "the transaction was rolled back");
    }
  };
  return { perform, transaction, table: sqlTable("mssql", perform), close: () => pool.then((p) => p.close(), () => {}) };
}

function splitOp(op: unknown[]): [string, unknown[]] {
  const { sql, args } = sqlOperation(op);
  return [sql, args];
}
