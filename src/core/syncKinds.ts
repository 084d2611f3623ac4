// The kinds of definitions edge sync moves, named here once, each with where its assets' names
// are stored. Everything that lists the kinds reads this table: the change log's asset types and
// the modules a template names (src/domain), the query of a system's asset names (src/store), the
// sync kinds' registry (src/sync/kinds/: what each kind does, a file each) and the console's
// template editor. Nothing here does I/O, so every layer and the console's browser code can use it.

/** Each kind, in the order lists of them are shown (error messages, the console), with the table
 *  and column holding its assets' names (the name templates, the change log and sync status use). */
export const DEFINITION_KINDS = {
  service: { table: "services", nameColumn: "name" },
  library: { table: "libraries", nameColumn: "name" },
  trigger: { table: "triggers", nameColumn: "name" },
  timer: { table: "timers", nameColumn: "name" },
  collection: { table: "collections", nameColumn: "name" },
  role: { table: "roles", nameColumn: "name" },
  user: { table: "users", nameColumn: "email" },
  device: { table: "devices", nameColumn: "name" },
  adapter: { table: "adapters", nameColumn: "name" },
  portal: { table: "portals", nameColumn: "name" },
  plugin: { table: "plugins", nameColumn: "name" },
  servicecache: { table: "service_caches", nameColumn: "name" },
  webhook: { table: "webhooks", nameColumn: "name" },
  bucketset: { table: "bucket_sets", nameColumn: "name" },
  usersecret: { table: "user_secrets", nameColumn: "name" },
} as const;

export type DefinitionType = keyof typeof DEFINITION_KINDS;

/** The kinds of definitions edge sync moves. */
export const DEFINITION_TYPES = Object.keys(DEFINITION_KINDS) as readonly DefinitionType[];

/** What a template entry may name: a kind of definition, or topics whose messages are relayed. */
export const TEMPLATE_MODULES = [...DEFINITION_TYPES, "topic"] as const;

export const isDefinitionType = (t: string): t is DefinitionType => Object.hasOwn(DEFINITION_KINDS, t);
