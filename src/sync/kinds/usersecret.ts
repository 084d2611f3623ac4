// User secrets: each node keeps a value sealed with its own secret box, so a body names the value
// sealed by the node that holds it ({name, sealed}). On the sync link (the edge's authenticated
// channel) it travels opened ({name, value}): `wire` turns one into the other at either end.
import type { SecretBox } from "../../auth/secrets.ts";
import { nowIso } from "../../core/ids.ts";
import { type UserSecretRow, userSecretsRepo } from "../../store/userSecrets.ts";
import { byName, type DefinitionKind } from "./kind.ts";

interface Kept { name: string; sealed: string }
interface Travelling { name: string; value: unknown }

export const usersecret: DefinitionKind<UserSecretRow> = {
  type: "usersecret",
  list: (ex, sk) => userSecretsRepo.list(ex, sk), nameOf: (r) => r.name,
  body: (_ex, _sk, r): Kept => ({ name: r.name, sealed: r.sealed }),
  apply: (ex, sk, _n, b: Kept) => userSecretsRepo.put(ex, { system_key: sk, name: b.name, sealed: b.sealed, updated_at: nowIso() }),
  remove: (ex, sk, name) => userSecretsRepo.delete(ex, sk, name),
  deleteBody: (_ex, _sk, name) => byName(name), stale: [],
  wire: {
    out: (b: Kept, box: SecretBox): Travelling => ({ name: b.name, value: JSON.parse(box.open(b.sealed)) }),
    in: (b: Travelling, box: SecretBox): Kept => ({ name: b.name, sealed: box.seal(JSON.stringify(b.value)) }),
  },
};
