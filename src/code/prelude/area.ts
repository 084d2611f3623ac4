// What one area of the prelude is: JavaScript run inside every sandbox, on the sandbox's side of
// the service library (its host operations are in library/<area>.ts, on the main thread).
export interface PreludeArea {
  /** evaluated inside the prelude's closure, after the core: it sees `call`, `classic`,
   *  `plainQuery`, `ClearBlade`, `ClearBladeAsync` and the other core helpers */
  js: string;
  /** The names the area defines (such as "ClearBlade.Cache" or "MQTT"), when its JavaScript is
   *  to be compiled the first time a run touches one of them rather than in every new sandbox.
   *  It then sees only the core helpers (lazyArea in core.ts), not other areas'. */
  lazy?: string[];
}
