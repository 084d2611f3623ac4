// Request-body validation with zod, turned into the API's 400 naming the offending field.
import { z } from "zod";
import { ApiError } from "./errors.ts";
import { jsonTooDeep, MAX_JSON_DEPTH } from "./jsonDepth.ts";

export function validate<T extends z.ZodType>(schema: T, input: unknown, what = "body"): z.infer<T> {
  const r = schema.safeParse(input === undefined ? {} : input);
  if (r.success) return r.data;
  throw new ApiError("INVALID_ARGUMENT", describeIssues(r.error, what));
}

export function describeIssues(err: z.ZodError, what: string): string {
  return err.issues.slice(0, 5).map((i) => describeIssue(i, what)).join("; ");
}

function describeIssue(i: z.core.$ZodIssue, what: string): string {
  const path = i.path.length ? i.path.join(".") : what;
  if (i.code === "unrecognized_keys") return `${what}: unknown field${i.keys.length > 1 ? "s" : ""} ${i.keys.map((k) => `'${k}'`).join(", ")}`;
  if (i.code === "invalid_union" && i.errors.length) {
    // Report the alternative the body came closest to: the one with the fewest problems.
    const best = [...i.errors].sort((a, b) => a.length - b.length)[0]!;
    return best.slice(0, 3).map((x) => describeIssue({ ...x, path: [...i.path, ...x.path] } as z.core.$ZodIssue, what)).join("; ");
  }
  return `${path}: ${i.message}`;
}

/** An object body (a missing one is empty): anything else (null, array, string, number) is a 400. */
export function objectBody(body: unknown, what = "body"): Record<string, unknown> {
  if (body === undefined) return {};
  if (body === null || typeof body !== "object" || Array.isArray(body)) throw new ApiError("INVALID_ARGUMENT", `${what} must be a JSON object`);
  return body as Record<string, unknown>;
}

/** Refuses fields outside `known` (a 400 naming them): a misspelt or foreign field is a mistake
 *  the caller should hear about, not something dropped. */
export function knownFields(b: Record<string, unknown>, known: ReadonlySet<string>, what = "body"): Record<string, unknown> {
  for (const k in b) if (!known.has(k)) throw new ApiError("INVALID_ARGUMENT", `${what}: unknown field '${k}' (known: ${[...known].join(", ")})`);
  return b;
}

export const email = z.string().trim().min(3).max(254).regex(/^[^\s@]+@[^\s@]+$/, "must be an email address");
export const nonEmpty = z.string().min(1, "must not be empty");
export const password = z.string().min(1, "must not be empty").max(1024);

// (a code worker checks values with them too, without this module's validation library)
export { jsonTooDeep, MAX_JSON_DEPTH };

const PROTO_KEY = /(?<!\\)"__proto__"\s*:/;

/** Refuses JSON text from a caller that nests deeper than MAX_JSON_DEPTH or uses "__proto__" as a
 *  key (JSON.parse keeps it as an own key, but any copy made by assignment turns it into the
 *  prototype). Both checks are cheap scans, skipped where they cannot apply. */
export function checkJsonText(text: string): void {
  if (jsonTooDeep(text)) throw new ApiError("BAD_JSON", `the document is nested deeper than ${MAX_JSON_DEPTH} levels`);
  if (text.includes("__proto__") && PROTO_KEY.test(text)) throw new ApiError("INVALID_ARGUMENT", `"__proto__" may not be used as a key`);
}
