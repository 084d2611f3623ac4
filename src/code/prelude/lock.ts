// Locks: ClearBlade.Lock(name, caller) (callbacks optional) and ClearBladeAsync.Lock(name,
// caller) (promises that settle once granted or released): lock/unlock exclusive, rlock/runlock
// shared, per system by name (domain/locks.ts). What a run holds or waits for is given up when the
// run ends.
import type { PreludeArea } from "./area.ts";

const js = String.raw`
  function lockCalls(name, caller, send) {
    var args = { name: name, caller: caller };
    return {
      lock: function (cb) { return send("lock.lock", args, cb); },
      unlock: function (cb) { return send("lock.unlock", args, cb); },
      rlock: function (cb) { return send("lock.rlock", args, cb); },
      runlock: function (cb) { return send("lock.runlock", args, cb); },
    };
  }
  ClearBlade.Lock = function (name, caller) { return lockCalls(name, caller, classic); };
  ClearBladeAsync.Lock = function (name, caller) {
    return lockCalls(name, caller, function (op, args) { return call(op, args).then(function () { return undefined; }); });
  };
`;

export const lock: PreludeArea = { js: js, lazy: ["ClearBlade.Lock", "ClearBladeAsync.Lock"] };
