// Structured logs: one JSON object per line on stderr. Nothing secret is ever passed here.
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
}

export function createLogger(level: LogLevel, base: Record<string, unknown> = {}, write: (line: string) => void = (l) => process.stderr.write(l)): Logger {
  return make({ min: LOG_LEVELS.indexOf(level) }, base, write);
}

/** Children share their parent's `at`, so one setLevel reaches all of them. */
function make(at: { min: number }, base: Record<string, unknown>, write: (line: string) => void): Logger {
  const emit = (lvl: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (LOG_LEVELS.indexOf(lvl) < at.min) return;
    write(JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...base, ...fields }, errorReplacer) + "\n");
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
    child: (f) => make(at, { ...base, ...f }, write),
    setLevel: (l) => { at.min = LOG_LEVELS.indexOf(l); },
  };
}

function errorReplacer(_k: string, v: unknown) {
  return v instanceof Error ? { name: v.name, message: v.message } : v;
}
