// Migrations 6 to 12: edges and sync, webhooks, throttling cases, adapters, external databases,
// synced assets and the MQTT state's tenant scope (src/store/mqtt.ts). Released: never edited
// (see src/store/migrations.ts).
import { MQTT_SCOPE_MIGRATION } from "../mqtt.ts";
import type { Migration } from "./migration.ts";

export const VERSIONS_6_TO_12: Migration[] = [
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
];
