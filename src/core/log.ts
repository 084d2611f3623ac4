// Structured logs: one JSON object per line on stderr. Nothing secret is ever passed here.
import { writeSync } from "node:fs";

export const LOG_LEVELS = ["debug", "info", "warn", "error", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
  /** Changes the level of this logger and of every logger made from it (a SIGHUP reload). */
  setLevel(level: LogLevel): void;
  /** Whether a line at this level is written (a hot path builds its fields only then). */
  enabled(level: LogLevel): boolean;
}

export function createLogger(level: LogLevel, base: Record<string, unknown> = {}, write: (line: string) => void = stderrLines()): Logger {
  return make({ min: LOG_LEVELS.indexOf(level) }, base, write);
}

/** Longest text held before it is written. */
const PENDING_MAX = 64 * 1024;
let toStderr: ((line: string) => void) | null = null;

/** stderr, written once per turn of the event loop rather than once per line (a busy server
 *  logs a line per request); what is held when the process exits is written then. */
function stderrLines(): (line: string) => void {
  if (toStderr) return toStderr;
  let pending = "";
  const flush = () => {
    if (!pending) return;
    const out = pending;
    pending = "";
    process.stderr.write(out);
  };
  process.on("exit", () => {
    if (pending) try { writeSync(2, pending); } catch { /* stderr closed */ }
    pending = "";
  });
  return (toStderr = (line) => {
    if (!pending) setImmediate(flush);
    pending += line;
    if (pending.length >= PENDING_MAX) flush();
  });
}

/** Children share their parent's `at`, so one setLevel reaches all of them. */
function make(at: { min: number }, base: Record<string, unknown>, write: (line: string) => void): Logger {
  // The line is written as text, field by field: several times cheaper than spreading the fields
  // into one object and stringifying it with a replacer, which a line per HTTP request pays.
  let baseText = "";
  for (const k in base) { const v = value(base[k]); if (v !== undefined) baseText += `,${JSON.stringify(k)}:${v}`; }
  const emit = (lvl: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (LOG_LEVELS.indexOf(lvl) < at.min) return;
    let line = `{"time":"${new Date().toISOString()}","level":"${lvl}","msg":${JSON.stringify(msg)}`;
    if (fields) {
      let own = "";
      for (const k in fields) {
        const v = value(fields[k]);
        if (v === undefined) continue; // as JSON.stringify leaves out undefined and functions
        if (k in base) return write(JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...base, ...fields }, errorReplacer) + "\n");
        own += `,${JSON.stringify(k)}:${v}`;
      }
      line += baseText + own;
    } else line += baseText;
    write(line + "}\n");
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
    child: (f) => make(at, { ...base, ...f }, write),
    setLevel: (l) => { at.min = LOG_LEVELS.indexOf(l); },
    enabled: (l) => LOG_LEVELS.indexOf(l) >= at.min,
  };
}

/** A field's JSON: errors as their name and message, wherever they are. */
const value = (v: unknown): string | undefined => (typeof v === "object" && v !== null ? JSON.stringify(v, errorReplacer) : JSON.stringify(v));

function errorReplacer(_k: string, v: unknown) {
  return v instanceof Error ? { name: v.name, message: v.message } : v;
}
