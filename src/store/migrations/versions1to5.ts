// Migrations 1 to 5: the schema of accounts and systems, collections, the MQTT broker's state
// (src/store/mqtt.ts), devices and message history, code services and triggers. Released:
// never edited (see src/store/migrations.ts).
import { MQTT_MIGRATION } from "../mqtt.ts";
import type { Migration } from "./migration.ts";

export const VERSIONS_1_TO_5: Migration[] = [
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
];
