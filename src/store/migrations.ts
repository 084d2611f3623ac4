// Versioned schema. Each migration runs once, in a transaction together with its record in
// schema_migrations; a failure leaves the database as it was. Append only: never edit a
// released migration, add a new one.
//
// One history for both engines. Statements are written for SQLite; on PostgreSQL, CREATE TABLE
// and ADD COLUMN have their column types translated (dialect.ts, ddl), and a statement using
// functions the engines spell differently is written as a function of the dialect. A function
// may return null: nothing to do on that engine.
import { refuse } from "../core/errors.ts";
import { VERSION } from "../version.ts";
import type { Db, Executor } from "./db.ts";
import type { Dialect } from "../core/dialect.ts";
import { MQTT_MIGRATION, MQTT_SCOPE_MIGRATION } from "./mqtt.ts";

export type Statement = string | ((d: Dialect) => string | null);
export interface Migration { version: number; name: string; up: Statement[] }

/** A migration's statements as this engine runs them. */
export const statementsFor = (m: Migration, d: Dialect): string[] =>
  m.up.map((s) => (typeof s === "string" ? d.ddl(s) : s(d))).filter((s): s is string => s !== null);

export const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: "accounts",
    up: [
      `CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)`,
      `CREATE TABLE developers (
        id TEXT PRIMARY KEY,
        email TEXT NOT NULL,
        email_lower TEXT NOT NULL UNIQUE,
        password_hash TEXT NOT NULL,
        fname TEXT NOT NULL DEFAULT '',
        lname TEXT NOT NULL DEFAULT '',
        org TEXT NOT NULL DEFAULT '',
        phone TEXT NOT NULL DEFAULT '',
        admin INTEGER NOT NULL DEFAULT 0,
        two_factor_enabled INTEGER NOT NULL DEFAULT 0,
        two_factor_method TEXT NOT NULL DEFAULT '',
        creation_date TEXT NOT NULL,
        last_login TEXT
      )`,
      `CREATE TABLE systems (
        system_key TEXT PRIMARY KEY,
        system_secret TEXT NOT NULL,
        name TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        owner_id TEXT NOT NULL REFERENCES developers(id),
        token_ttl INTEGER NOT NULL DEFAULT 432000,
        token_ttl_user INTEGER,
        token_ttl_device INTEGER,
        auth_required INTEGER NOT NULL DEFAULT 1,
        registration INTEGER NOT NULL DEFAULT 1,
        created_at TEXT NOT NULL
      )`,
      `CREATE INDEX systems_owner ON systems(owner_id)`,
      // kind: dev | user | anon | device | edge. expires_at 0 = never (token_ttl -1).
      `CREATE TABLE tokens (
        token_hash TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        subject_id TEXT NOT NULL,
        system_key TEXT,
        expires_at INTEGER NOT NULL,
        refresh_hash TEXT UNIQUE,
        refresh_expires_at INTEGER,
        created_at INTEGER NOT NULL
      )`,
      `CREATE INDEX tokens_subject ON tokens(kind, subject_id)`,
      `CREATE INDEX tokens_system ON tokens(system_key)`,
      `CREATE TABLE users (
        user_id TEXT PRIMARY KEY,
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        email TEXT NOT NULL,
        email_lower TEXT NOT NULL,
        password_hash TEXT NOT NULL,
        creation_date TEXT NOT NULL,
        data TEXT NOT NULL DEFAULT '{}',
        UNIQUE(system_key, email_lower)
      )`,
      // Custom columns of the users, devices and edges tables of a system (table = users|devices|edges).
      `CREATE TABLE custom_columns (
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        tbl TEXT NOT NULL,
        name TEXT NOT NULL,
        type TEXT NOT NULL,
        PRIMARY KEY (system_key, tbl, name)
      )`,
      `CREATE TABLE roles (
        role_id TEXT NOT NULL,
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        name TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        permissions TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (system_key, role_id),
        UNIQUE (system_key, name)
      )`,
      // subject_kind: user | device
      `CREATE TABLE role_members (
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        subject_kind TEXT NOT NULL,
        subject_id TEXT NOT NULL,
        role_id TEXT NOT NULL,
        PRIMARY KEY (system_key, subject_kind, subject_id, role_id)
      )`,
      `CREATE INDEX role_members_role ON role_members(system_key, role_id)`,
    ],
  },
  {
    version: 2,
    name: "collections",
    up: [
      // Each collection's rows live in their own table "c_<collection_id>" (created by the
      // collections repository); this is their schema. connection: set for a collection that
      // represents an external database (JSON of the connection details).
      `CREATE TABLE collections (
        collection_id TEXT PRIMARY KEY,
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        name TEXT NOT NULL,
        connection TEXT,
        created_at TEXT NOT NULL,
        UNIQUE (system_key, name)
      )`,
      `CREATE TABLE collection_columns (
        collection_id TEXT NOT NULL REFERENCES collections(collection_id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        type TEXT NOT NULL,
        position INTEGER NOT NULL,
        PRIMARY KEY (collection_id, name)
      )`,
      `CREATE TABLE collection_indexes (
        collection_id TEXT NOT NULL REFERENCES collections(collection_id) ON DELETE CASCADE,
        column_name TEXT NOT NULL,
        is_unique INTEGER NOT NULL,
        PRIMARY KEY (collection_id, column_name, is_unique)
      )`,
    ],
  },
  MQTT_MIGRATION,
  {
    version: 4,
    name: "devices and message history",
    up: [
      // active_key and rotating keys are credentials: stored as hashes only.
      `CREATE TABLE devices (
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        name TEXT NOT NULL,
        type TEXT NOT NULL DEFAULT '',
        state TEXT NOT NULL DEFAULT '',
        description TEXT NOT NULL DEFAULT '',
        enabled INTEGER NOT NULL DEFAULT 1,
        allow_key_auth INTEGER NOT NULL DEFAULT 1,
        allow_certificate_auth INTEGER NOT NULL DEFAULT 0,
        active_key_hash TEXT,
        key_hashes TEXT NOT NULL DEFAULT '[]',
        certificate TEXT NOT NULL DEFAULT '',
        created_date INTEGER NOT NULL,
        last_active_date INTEGER NOT NULL,
        data TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (system_key, name)
      )`,
      // Message history in pages: each row holds a batch of one topic's messages (encoded by
      // store/messages.ts), so a busy topic costs one row write per batch, not one per message.
      // Times are epoch milliseconds.
      `CREATE TABLE message_pages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        system_key TEXT NOT NULL,
        topic TEXT NOT NULL,
        first_time INTEGER NOT NULL,
        last_time INTEGER NOT NULL,
        count INTEGER NOT NULL,
        data BLOB NOT NULL
      )`,
      `CREATE INDEX message_pages_topic ON message_pages(system_key, topic, last_time)`,
      `CREATE INDEX message_pages_time ON message_pages(last_time)`,
      // per-topic history settings; max_rows/max_time 0 = the defaults, -1 = no history
      `CREATE TABLE message_storage (
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        topic TEXT NOT NULL,
        max_rows INTEGER NOT NULL,
        max_time INTEGER NOT NULL,
        edge INTEGER NOT NULL DEFAULT 1,
        platform INTEGER NOT NULL DEFAULT 1,
        PRIMARY KEY (system_key, topic)
      )`,
    ],
  },
  {
    version: 5,
    name: "code services, libraries, triggers, timers",
    up: [
      `CREATE TABLE services (
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        name TEXT NOT NULL,
        code TEXT NOT NULL,
        params TEXT NOT NULL DEFAULT '[]',
        dependencies TEXT NOT NULL DEFAULT '',
        run_user TEXT NOT NULL DEFAULT '',
        execution_timeout INTEGER NOT NULL DEFAULT 60,
        concurrency INTEGER NOT NULL DEFAULT 0,
        logging_enabled INTEGER NOT NULL DEFAULT 0,
        auto_restart INTEGER NOT NULL DEFAULT 0,
        auto_balance INTEGER NOT NULL DEFAULT 0,
        log_ttl_minutes INTEGER NOT NULL DEFAULT 10080,
        run_on_edge INTEGER NOT NULL DEFAULT 1,
        run_on_platform INTEGER NOT NULL DEFAULT 1,
        version INTEGER NOT NULL DEFAULT 1,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (system_key, name)
      )`,
      `CREATE TABLE libraries (
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        name TEXT NOT NULL,
        code TEXT NOT NULL,
        dependencies TEXT NOT NULL DEFAULT '',
        description TEXT NOT NULL DEFAULT '',
        api TEXT NOT NULL DEFAULT '',
        visibility TEXT NOT NULL DEFAULT 'system',
        version INTEGER NOT NULL DEFAULT 1,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (system_key, name)
      )`,
      `CREATE TABLE library_versions (
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        name TEXT NOT NULL,
        version INTEGER NOT NULL,
        code TEXT NOT NULL,
        dependencies TEXT NOT NULL DEFAULT '',
        description TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        PRIMARY KEY (system_key, name, version)
      )`,
      `CREATE TABLE failed_runs (
        id TEXT PRIMARY KEY,
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        service_name TEXT NOT NULL,
        params TEXT NOT NULL,
        error TEXT NOT NULL,
        user_id TEXT NOT NULL DEFAULT '',
        user_type TEXT NOT NULL DEFAULT '',
        trigger TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL
      )`,
      `CREATE INDEX failed_runs_service ON failed_runs(system_key, service_name, created_at)`,
      `CREATE TABLE triggers (
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        name TEXT NOT NULL,
        def_module TEXT NOT NULL,
        def_name TEXT NOT NULL,
        key_value_pairs TEXT NOT NULL DEFAULT '{}',
        service_name TEXT NOT NULL,
        disabled INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        PRIMARY KEY (system_key, name)
      )`,
      // next_run: epoch ms of the next firing; runs: firings so far (repeats -1 = forever)
      `CREATE TABLE timers (
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        name TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        frequency INTEGER NOT NULL,
        repeats INTEGER NOT NULL,
        start_time TEXT NOT NULL,
        service_name TEXT NOT NULL,
        user_id TEXT NOT NULL DEFAULT '',
        user_type INTEGER NOT NULL DEFAULT 1,
        disabled INTEGER NOT NULL DEFAULT 0,
        runs INTEGER NOT NULL DEFAULT 0,
        next_run INTEGER,
        created_at TEXT NOT NULL,
        PRIMARY KEY (system_key, name)
      )`,
      `CREATE INDEX timers_next ON timers(next_run)`,
    ],
  },
  {
    version: 6,
    name: "edges and sync",
    up: [
      `CREATE TABLE edges (
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        name TEXT NOT NULL,
        token_hash TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        template TEXT NOT NULL DEFAULT '',
        is_connected INTEGER NOT NULL DEFAULT 0,
        first_talked INTEGER,
        last_talked INTEGER,
        last_seen_version TEXT NOT NULL DEFAULT '',
        last_seen_os TEXT NOT NULL DEFAULT '',
        last_seen_architecture TEXT NOT NULL DEFAULT '',
        cursor INTEGER NOT NULL DEFAULT 0,
        created_date INTEGER NOT NULL,
        data TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (system_key, name)
      )`,
      // per-edge template entries; a named template (edge.template) supplies the rest
      `CREATE TABLE edge_template_entries (
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        edge_name TEXT NOT NULL,
        def_module TEXT NOT NULL,
        def_name TEXT NOT NULL,
        mode TEXT NOT NULL,
        rows INTEGER NOT NULL DEFAULT 1,
        PRIMARY KEY (system_key, edge_name, def_module, def_name)
      )`,
      // The change log: every change of a syncable asset, written in the change's transaction.
      // asset_type: service|library|trigger|timer|collection|row|role|user|device|adapter;
      // for rows asset_name is the collection name and item_id the row.
      `CREATE TABLE changes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        system_key TEXT NOT NULL,
        asset_type TEXT NOT NULL,
        asset_name TEXT NOT NULL,
        item_id TEXT,
        op TEXT NOT NULL,
        version INTEGER NOT NULL,
        hlc TEXT NOT NULL,
        origin TEXT NOT NULL DEFAULT '',
        body TEXT
      )`,
      `CREATE INDEX changes_system_seq ON changes(system_key, seq)`,
      `CREATE TABLE sync_status (
        system_key TEXT NOT NULL,
        edge_name TEXT NOT NULL,
        asset_type TEXT NOT NULL,
        asset_name TEXT NOT NULL,
        desired_version INTEGER NOT NULL DEFAULT 0,
        applied_version INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL,
        last_error TEXT NOT NULL DEFAULT '',
        attempts INTEGER NOT NULL DEFAULT 0,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (system_key, edge_name, asset_type, asset_name)
      )`,
      // deleted rows, so an older write arriving later cannot bring a row back (last writer wins)
      `CREATE TABLE tombstones (
        collection_id TEXT NOT NULL,
        item_id TEXT NOT NULL,
        hlc TEXT NOT NULL,
        PRIMARY KEY (collection_id, item_id)
      )`,
      // edge side: changes waiting for the platform to acknowledge them
      `CREATE TABLE outbox (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        body TEXT NOT NULL,
        created_at INTEGER NOT NULL
      )`,
      // edge side: sync bookkeeping (cursor, template, node id)
      `CREATE TABLE sync_state (key TEXT PRIMARY KEY, value TEXT NOT NULL)`,
    ],
  },
  {
    version: 7,
    name: "webhooks",
    up: [
      `CREATE TABLE webhooks (
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        name TEXT NOT NULL,
        id TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        service_name TEXT NOT NULL,
        path TEXT NOT NULL DEFAULT '',
        auth_method TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (system_key, name)
      )`,
    ],
  },
  {
    version: 8,
    name: "throttle cases",
    up: [
      `CREATE TABLE throttle_cases (
        throttler_name TEXT NOT NULL,
        case_name TEXT NOT NULL,
        system_key TEXT NOT NULL,
        consumer TEXT NOT NULL,
        resource TEXT NOT NULL DEFAULT '',
        limiter_type TEXT NOT NULL,
        max_num INTEGER NOT NULL,
        duration INTEGER,
        priority INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (throttler_name, case_name)
      )`,
    ],
  },
  {
    version: 9,
    name: "adapters",
    up: [
      `CREATE TABLE adapters (
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        name TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        protocol TEXT NOT NULL DEFAULT '',
        architecture TEXT NOT NULL DEFAULT '',
        os TEXT NOT NULL DEFAULT '',
        deploy_command TEXT NOT NULL DEFAULT '',
        start_command TEXT NOT NULL DEFAULT '',
        stop_command TEXT NOT NULL DEFAULT '',
        status_command TEXT NOT NULL DEFAULT '',
        undeploy_command TEXT NOT NULL DEFAULT '',
        logs_command TEXT NOT NULL DEFAULT '',
        run_stop_on_deploy INTEGER NOT NULL DEFAULT 0,
        run_start_on_deploy INTEGER NOT NULL DEFAULT 0,
        run_deploy_on_deploy INTEGER NOT NULL DEFAULT 0,
        version INTEGER NOT NULL DEFAULT 1,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (system_key, name)
      )`,
      `CREATE TABLE adapter_files (
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        adapter_name TEXT NOT NULL,
        name TEXT NOT NULL,
        version INTEGER NOT NULL,
        path_name TEXT NOT NULL,
        owner TEXT NOT NULL DEFAULT '',
        group_name TEXT NOT NULL DEFAULT '',
        permissions TEXT NOT NULL,
        hash TEXT NOT NULL,
        size INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (system_key, adapter_name, name, version)
      )`,
      // file contents, once per distinct content (sha-256)
      `CREATE TABLE blobs (hash TEXT PRIMARY KEY, content BLOB NOT NULL)`,
    ],
  },
  {
    version: 10,
    name: "external databases",
    up: [
      `CREATE TABLE external_dbs (
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        name TEXT NOT NULL,
        id TEXT NOT NULL,
        db_type TEXT NOT NULL,
        credentials TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (system_key, name)
      )`,
    ],
  },
  {
    version: 11,
    name: "synced assets",
    up: [
      // edge side: the definitions that came from the platform, so a snapshot removes what the
      // platform no longer sends without touching what was made on the edge itself
      `CREATE TABLE synced_assets (asset_type TEXT NOT NULL, asset_name TEXT NOT NULL, PRIMARY KEY (asset_type, asset_name))`,
    ],
  },
  MQTT_SCOPE_MIGRATION,
  {
    version: 13,
    name: "trigger run identity",
    up: [
      // whose rights a trigger's service runs with (as timers have): 1 the system's developer,
      // 2 a user, 3 a device; existing triggers were made by developers or ran as one
      `ALTER TABLE triggers ADD COLUMN user_id TEXT NOT NULL DEFAULT ''`,
      `ALTER TABLE triggers ADD COLUMN user_type INTEGER NOT NULL DEFAULT 1`,
    ],
  },
  {
    version: 14,
    name: "edge sync identity and horizon",
    up: [
      // an edge record's identity: an edge deleted and created again under the same name is a new
      // incarnation, and the edge that held the old one starts over
      `ALTER TABLE edges ADD COLUMN incarnation TEXT NOT NULL DEFAULT ''`,
      (d) => `UPDATE edges SET incarnation = ${d.randomHex}`,
      // the template the edge last completed a snapshot of (JSON); NULL: none yet; '*': edges that
      // synced before this was recorded (their current template is taken as applied)
      `ALTER TABLE edges ADD COLUMN applied_template TEXT`,
      `UPDATE edges SET applied_template = '*' WHERE cursor > 0 OR first_talked IS NOT NULL`,
      // per system, up to which sequence number the change log was compacted: an edge whose cursor
      // is at or past it can resume from the log, an older one needs a snapshot
      `CREATE TABLE sync_horizons (system_key TEXT PRIMARY KEY, compacted_through INTEGER NOT NULL)`,
      // per asset (rows: per collection), its latest change in the log: an edge whose cursor is
      // before it is owed it (sync status without reading the log)
      `CREATE TABLE sync_asset_seqs (
        system_key TEXT NOT NULL, asset_type TEXT NOT NULL, asset_name TEXT NOT NULL, seq INTEGER NOT NULL,
        PRIMARY KEY (system_key, asset_type, asset_name)
      )`,
      `INSERT INTO sync_asset_seqs(system_key, asset_type, asset_name, seq) SELECT system_key, asset_type, asset_name, max(seq) FROM changes GROUP BY system_key, asset_type, asset_name`,
    ],
  },
  {
    version: 15,
    name: "device key verifiers, indexes for default listings",
    up: [
      // fast verifiers of client-chosen device keys (HMACs under the server's secret key, which is
      // never in the database; see auth/deviceKeys.ts)
      `ALTER TABLE devices ADD COLUMN key_verifiers TEXT NOT NULL DEFAULT '[]'`,
      // the orders device and user listings use when the query has no SORT
      `CREATE INDEX devices_created ON devices(system_key, created_date, name)`,
      `CREATE INDEX users_created ON users(system_key, creation_date, user_id)`,
    ],
  },
  {
    version: 16,
    name: "insertion order on PostgreSQL",
    // Tables listed in the order rows were added read SQLite's implicit rowid; PostgreSQL has
    // none, so there they get a column of that name (collection tables get theirs when created).
    up: ["roles", "custom_columns", "collection_indexes", "edge_template_entries", "mqtt_subscriptions"].map((table) => (d) =>
      d.name === "postgres" ? `ALTER TABLE ${table} ADD COLUMN rowid BIGINT GENERATED BY DEFAULT AS IDENTITY UNIQUE` : null),
  },
  {
    version: 17,
    name: "platform nodes and the node holding each edge's connection",
    up: [
      // every platform node on the database, with its heartbeat (ms): a node whose heartbeat
      // stopped is dead, and the edges it held are no longer connected
      `CREATE TABLE cluster_nodes (node_id TEXT PRIMARY KEY, started_at BIGINT NOT NULL, heartbeat_at BIGINT NOT NULL, clustered INTEGER NOT NULL DEFAULT 0)`,
      // the node holding an edge's sync connection ('' when none); last_talked is its heartbeat
      `ALTER TABLE edges ADD COLUMN node_id TEXT NOT NULL DEFAULT ''`,
    ],
  },
  {
    version: 18,
    name: "developer keys",
    up: [
      // long-lived developer access for tools and monitors; the token itself is a tokens row
      // (kind devkey, subject the key's id), stored hashed like every token
      `CREATE TABLE developer_keys (
        id TEXT PRIMARY KEY,
        developer_id TEXT NOT NULL REFERENCES developers(id),
        name TEXT NOT NULL,
        token_hash TEXT NOT NULL,
        systems TEXT,
        read_only INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        expires_at BIGINT NOT NULL DEFAULT 0
      )`,
      `CREATE INDEX developer_keys_developer ON developer_keys(developer_id)`,
    ],
  },
  {
    version: 19,
    name: "service caches",
    up: [
      // shared caches of a system's code services: the definitions only (their values live in
      // memory or Redis, see store/cacheValues.ts); ttl in seconds, for the whole cache
      `CREATE TABLE service_caches (
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        name TEXT NOT NULL,
        id TEXT NOT NULL,
        ttl INTEGER NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (system_key, name)
      )`,
    ],
  },
  {
    version: 20,
    name: "code service logs",
    up: [
      // the log() and console output of runs of services that keep their logs, a few per service
      // (the run's instance id is the row's id)
      `CREATE TABLE code_logs (
        id TEXT PRIMARY KEY,
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        service_name TEXT NOT NULL,
        started_at TEXT NOT NULL,
        duration_ms INTEGER NOT NULL,
        success INTEGER NOT NULL,
        log TEXT NOT NULL
      )`,
      `CREATE INDEX code_logs_service ON code_logs(system_key, service_name, started_at)`,
    ],
  },
  {
    version: 21,
    name: "per-asset sync versions, an edge's last refusal",
    up: [
      // an asset's version counts its changes (sync status showed log sequence numbers); what the
      // systems with edges hold now is at version 1, and so is what their edges were told of
      `ALTER TABLE sync_asset_seqs ADD COLUMN version INTEGER NOT NULL DEFAULT 1`,
      ...Object.entries({ service: "services:name", library: "libraries:name", trigger: "triggers:name", timer: "timers:name", collection: "collections:name",
        row: "collections:name", role: "roles:name", user: "users:email", device: "devices:name", adapter: "adapters:name" }).map(([type, at]) => {
        const [table, column] = at.split(":");
        return `INSERT INTO sync_asset_seqs(system_key, asset_type, asset_name, seq, version) SELECT system_key, '${type}', ${column}, 0, 1 FROM ${table}
          WHERE system_key IN (SELECT system_key FROM edges) ON CONFLICT DO NOTHING`;
      }),
      `UPDATE sync_status SET applied_version = CASE WHEN applied_version > 0 AND applied_version >= desired_version THEN 1 ELSE 0 END, desired_version = 1`,
      // why the platform last refused the edge's link (a wrong token, a sync protocol or version
      // it does not serve), and when (epoch s)
      `ALTER TABLE edges ADD COLUMN last_refusal TEXT NOT NULL DEFAULT ''`,
      `ALTER TABLE edges ADD COLUMN last_refusal_at BIGINT`,
    ],
  },
  {
    version: 22,
    name: "phone as a user column of the developer's",
    up: [
      // phone was a column of every user; now a system has it when made: the systems whose users
      // hold a phone number get it, so none is hidden
      `INSERT INTO custom_columns(system_key, tbl, name, type)
        SELECT DISTINCT system_key, 'users', 'phone', 'string' FROM users WHERE data LIKE '%"phone":%'
        ON CONFLICT DO NOTHING`,
    ],
  },
  {
    version: 23,
    name: "edge groups",
    up: [
      // named sets of a system's edges, and of other groups (nested; never a cycle); both lists
      // as JSON arrays of names
      `CREATE TABLE edge_groups (
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        name TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        edges TEXT NOT NULL DEFAULT '[]',
        edge_groups TEXT NOT NULL DEFAULT '[]',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (system_key, name)
      )`,
    ],
  },
  {
    version: 25,
    name: "portals and plugins, developer sign-in challenges",
    up: [
      // portal and plugin records: config as JSON text (null: a plugin made without one), the
      // record's other fields as a JSON object
      ...["portals", "plugins"].map((table) => `CREATE TABLE ${table} (
        system_key TEXT NOT NULL REFERENCES systems(system_key) ON DELETE CASCADE,
        name TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        config TEXT,
        fields TEXT NOT NULL DEFAULT '{}',
        updated_at TEXT NOT NULL,
        PRIMARY KEY (system_key, name)
      )`),
      // a developer's second sign-in step: the intermediate token and the code, both hashed;
      // times in epoch s; a challenge is dead once used or out of attempts
      `CREATE TABLE two_factor_challenges (
        otp_id TEXT PRIMARY KEY,
        developer_id TEXT NOT NULL REFERENCES developers(id) ON DELETE CASCADE,
        token_hash TEXT NOT NULL,
        code_hash TEXT NOT NULL,
        method TEXT NOT NULL,
        issued_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        used INTEGER NOT NULL DEFAULT 0
      )`,
      `CREATE INDEX two_factor_challenges_expiry ON two_factor_challenges(expires_at)`,
    ],
  },
];

export async function migrate(db: Db, migrations: Migration[] = MIGRATIONS): Promise<number[]> {
  // nodes starting together on one database: each step runs under the schema lock, and a
  // migration another node applied meanwhile is skipped
  const lock = async (tx: Executor) => { if (db.dialect.schemaLock) await tx.get(db.dialect.schemaLock); };
  await db.tx(async (tx) => {
    await lock(tx);
    await tx.run(db.dialect.ddl(`CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`));
  });
  const done = new Set((await db.all<{ version: number }>(`SELECT version FROM schema_migrations`)).map((r) => r.version));
  // a newer version's migrations ran on it: this code would misread what they changed
  const known = Math.max(0, ...migrations.map((m) => m.version)), found = Math.max(0, ...done);
  if (found > known)
    throw refuse(`the database ${db.url} was written by a newer version of Outpost (schema version ${found}; this one, ${VERSION}, knows up to ${known}): ` +
      "run that version or a newer one, or restore a backup made by this one (outpost restore; a package upgrade leaves one in /var/backups/outpost)");
  const applied: number[] = [];
  for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
    if (done.has(m.version)) continue;
    const ran = await db.tx(async (tx) => {
      await lock(tx);
      if (await tx.get(`SELECT 1 AS x FROM schema_migrations WHERE version = ?`, [m.version])) return false;
      for (const sql of statementsFor(m, db.dialect)) await tx.run(sql);
      await tx.run(`INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)`, [m.version, m.name, new Date().toISOString()]);
      return true;
    });
    if (ran) applied.push(m.version);
  }
  return applied;
}
