// What a migration is (src/store/migrations.ts runs them in order) and how its statements are
// given for each engine.
import type { Dialect } from "../../core/dialect.ts";

export type Statement = string | ((d: Dialect) => string | null);
export interface Migration { version: number; name: string; up: Statement[] }

/** A migration's statements as this engine runs them. */
export const statementsFor = (m: Migration, d: Dialect): string[] =>
  m.up.map((s) => (typeof s === "string" ? d.ddl(s) : s(d))).filter((s): s is string => s !== null);
