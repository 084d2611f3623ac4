// A role's permissions as the console's matrix shows them (pure: no browser state, unit-tested):
// a row per asset and per kind granted as a whole, the rights each takes, and the change that
// sets a row's level through the roles API.

export interface Grant { ID?: string; Name: string; Level: number }
export interface Role { ID: string; Name: string; Description: string; Permissions: Record<string, Grant[] | { Level: number }> }

export const BUILTIN_ROLES = new Set(["Administrator", "Authenticated", "Anonymous"]);

/** The rights a level's bits carry (read 1, create 2, update 4, delete 8); running a service is
 *  its read bit, so for services that bit is the "execute" column. */
export const RIGHTS = [["read", 1], ["create", 2], ["update", 4], ["delete", 8], ["execute", 1]] as const;
export type Right = (typeof RIGHTS)[number][0];

/** Kinds granted per asset: the update's list name, the name the role reads back under, and the
 *  rights that mean something for it (a topic's read is subscribe, its create publish). */
export const ITEM_KINDS: { kind: string; wire: string; label: string; rights: Right[]; note?: Partial<Record<Right, string>> }[] = [
  { kind: "collections", wire: "Collections", label: "Collection", rights: ["read", "create", "update", "delete"] },
  { kind: "services", wire: "CodeServices", label: "Service", rights: ["execute"] },
  { kind: "topics", wire: "Topics", label: "Topic", rights: ["read", "create"], note: { read: "subscribe", create: "publish" } },
  { kind: "webhooks", wire: "Webhooks", label: "Webhook", rights: ["read", "create", "update", "delete"] },
  { kind: "adapters", wire: "Adapters", label: "Adapter", rights: ["read", "create", "update", "delete"] },
];
/** Kinds granted as a whole: the update's name, the read-back name, the label. */
export const WHOLE_KINDS: [string, string, string][] = [
  ["allcollections", "AllCollections", "All collections"], ["allservices", "AllServices", "All services"],
  ["users", "UsersList", "Users"], ["devices", "DevicesList", "Devices"], ["edges", "EdgesList", "Edges"],
  ["msgHistory", "MsgHistory", "Message history"], ["push", "Push", "Push"], ["roles", "Roles", "Roles"],
  ["timers", "Timers", "Timers"], ["triggers", "Triggers", "Triggers"], ["deployments", "Deployments", "Deployments"],
  ["manageusers", "ManageUsers", "Manage users"], ["usersecrets", "usersecrets", "User secrets"],
  ["adapters", "adapters", "All adapters"], ["webhooks", "AllWebhooks", "All webhooks"], ["filestores", "Filestores", "File stores"],
];

/** One row of the matrix: what it grants on, its level, and how an update names it. */
export interface MatrixRow { key: string; group: string; name: string; level: number; rights: Right[]; note?: Partial<Record<Right, string>>; change: (level: number) => Record<string, unknown> }

/** The matrix's rows: every asset of the system of each kind (granted or not), the topics and
 *  other assets the role names that are not listed, then the kinds granted as a whole. */
export function matrixRows(role: Role, assets: Record<string, { id?: string; name: string }[]>): MatrixRow[] {
  const rows: MatrixRow[] = [];
  for (const k of ITEM_KINDS) {
    const grants = (role.Permissions[k.wire] as Grant[] | undefined) ?? [];
    const seen = new Set<string>();
    const add = (name: string, id: string | undefined, level: number) => {
      seen.add(id ?? name);
      rows.push({ key: `${k.kind}/${id ?? name}`, group: k.label, name, level, rights: k.rights, note: k.note,
        change: (l) => ({ [k.kind]: [{ itemInfo: id ? { id } : { name }, permissions: l }] }) });
    };
    for (const a of assets[k.kind] ?? []) {
      const g = grants.find((x) => (a.id && x.ID === a.id) || x.Name === a.name);
      add(a.name, a.id, g?.Level ?? 0);
    }
    for (const g of grants) if (!seen.has(g.ID || g.Name)) add(g.Name, g.ID || undefined, g.Level);
  }
  for (const [kind, wire, label] of WHOLE_KINDS) {
    const level = (role.Permissions[wire] as { Level: number } | undefined)?.Level ?? 0;
    rows.push({ key: `all/${kind}`, group: "Whole kind", name: label, level, rights: ["read", "create", "update", "delete"], change: (l) => ({ [kind]: { permissions: l } }) });
  }
  return rows;
}

