// How deep JSON text nests, by a scan without parsing: here, apart from validate.ts, so that a code
// worker checks a cache value as the main thread does without loading the validation library.

/** Deepest nesting of objects and arrays a JSON document from a caller may have. Everything that
 *  walks a document (validation, the sandbox, the store) may recurse; a deeper one is refused
 *  before any of it. */
export const MAX_JSON_DEPTH = 128;

/** Whether JSON text nests objects and arrays deeper than MAX_JSON_DEPTH (strings skipped). */
export function jsonTooDeep(text: string): boolean {
  // a document of depth d has at least 2d characters: short ones need no scan
  if (text.length <= 2 * MAX_JSON_DEPTH) return false;
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34 /* " */) {
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 92 /* \\ */) i++;
        else if (d === 34) break;
      }
    } else if (c === 123 /* { */ || c === 91 /* [ */) {
      if (++depth > MAX_JSON_DEPTH) return true;
    } else if (c === 125 /* } */ || c === 93 /* ] */) depth--;
  }
  return false;
}
