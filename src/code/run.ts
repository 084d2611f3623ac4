// What a run of a service is made of, between the sandbox that runs it and what asks for it: the
// request it is given, the host calls it makes (RunHooks) and the outcome it ends with.

export interface RunHooks {
  /** a host operation as the run's effective user: its arguments and its answer ({ok, data} or
   *  {ok, error}) as JSON text. `answer` is called once, later; `blocking`: the run's stack waits
   *  for it (a classic call, a yield). */
  host(op: string, argsJson: string, answer: (replyJson: string) => void, blocking: boolean): void;
  /** the same, blocking this thread until the answer comes (a short operation's classic call): the
   *  answer, null when `deadline` (epoch ms; Infinity: none) passed first, or why the run was
   *  stopped meanwhile. Without it (a sandbox run in-process) every classic call suspends. */
  block?(op: string, argsJson: string, deadline: number): string | null | { stopped: string };
  /** Operations short enough that their promise flavour blocks too (with `block`): their answer
   *  is there when the call returns, without the worker going back to the pool for it. */
  quick?(op: string): boolean;
  /** A cache get or set answered on this thread, without the call's JSON (cacheMirror.ts): a
   *  get's value as JSON ("" for a missing key), "" for a set made; undefined when it cannot be
   *  answered here (the call then goes the usual way). */
  cache?(op: "get" | "set", cache: string, key: string, json: string): string | undefined;
  log(text: string): void;
}

/** What a run's `req` is made of (see the prelude's __run). */
export interface RunRequest {
  /** systemKey, systemSecret, userEmail, userid, userToken, isLogging, caller as JSON: the same
   *  for every run of one caller, so the sandbox sends it only when it changed */
  context: string;
  /** the parameters as JSON, null for none or {} (see paramsJson) */
  params: string | null;
  instanceId: string;
}

/** A run's answer keeps the form it left the sandbox in: "t" and a string, or "j" and JSON. It
 *  crosses threads as that text and is parsed once, where it is answered (see outcomeValue). */
export type RunOutcome =
  | { kind: "success" | "error"; raw: string; status?: number; headers?: Record<string, string> }
  | { kind: "failed"; error: string; timedOut?: boolean };

export const outcomeValue = (raw: string): unknown => (raw[0] === "t" ? raw.slice(1) : JSON.parse(raw.slice(1)));

/** The parameters as a run takes them: no parameters, or {}, are null (the prelude makes the {}
 *  itself, cheaper than parsing it in there). */
export function paramsJson(p: unknown): string | null {
  if (p === null || p === undefined) return null;
  if (typeof p !== "object" || Object.getPrototypeOf(p) !== Object.prototype) return JSON.stringify(p);
  for (const _ in p) return JSON.stringify(p);
  return null;
}
