// CSV as the console writes and reads it (RFC 4180: commas, CRLF lines, fields quoted when they
// hold a comma, a quote or a line break, quotes doubled). Pure: unit-tested.

const field = (v: string) => (/[",\r\n]/.test(v) || /^\s|\s$/.test(v) ? `"${v.replace(/"/g, '""')}"` : v);

/** Lines of fields as CSV text, one CRLF after each line (a lone empty field quoted: a blank line
 *  is no line). */
export const toCsv = (lines: string[][]) => lines.map((l) => `${l.length === 1 && l[0] === "" ? '""' : l.map(field).join(",")}\r\n`).join("");

/** CSV text as lines of fields. A blank line is skipped; a quote left open is an error. */
export function parseCsv(text: string): string[][] {
  const lines: string[][] = [];
  let line: string[] = [], cur = "", quoted = false, any = false;
  const endField = () => { line.push(cur); cur = ""; };
  const endLine = () => { endField(); if (any) lines.push(line); line = []; any = false; };
  const s = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (quoted) {
      if (c === '"') { if (s[i + 1] === '"') { cur += '"'; i++; } else quoted = false; }
      else cur += c;
    } else if (c === '"' && cur === "") { quoted = true; any = true; }
    else if (c === ",") { endField(); any = true; }
    else if (c === "\n" || c === "\r") { if (c === "\r" && s[i + 1] === "\n") i++; endLine(); }
    else { cur += c; any = true; }
  }
  if (quoted) throw new Error("the CSV ends inside a quoted field (a quote is not closed)");
  if (any || cur) endLine();
  return lines;
}

/** A cell's value as CSV text (objects as JSON, nothing as an empty field). */
export const csvText = (v: unknown) => (v === null || v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : String(v));
