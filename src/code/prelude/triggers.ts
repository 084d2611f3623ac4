// Triggers and timers from code: ClearBlade.Trigger / ClearBlade.Timer (Create, Fetch, and an
// instance's Update and Delete) and ClearBladeAsync.Triggers() / Timers() (create, read, update
// and delete by query). Everything goes through the triggers domain, as the REST routes do.
import type { PreludeArea } from "./area.ts";

const js = String.raw`
  function copyInto(target, data) { if (data && typeof data === "object") for (var k in data) target[k] = data[k]; return target; }

  // what Fetch and Create hand the callback: the definition's fields, with Update and Delete
  function TriggerInstance(data) { copyInto(this, data); this.systemKey = data && data.system_key; }
  TriggerInstance.prototype.Update = function (options, cb) {
    var self = this;
    return classic("trigger.update", { name: this.name, changes: options }, function (err, data) {
      if (!err) copyInto(self, data);
      if (typeof cb === "function") cb(err, data);
    });
  };
  TriggerInstance.prototype.Delete = function (cb) { return classic("trigger.delete", { name: this.name }, cb); };

  function TimerInstance(data) { copyInto(this, data); this.systemKey = data && data.system_key; }
  TimerInstance.prototype.Update = function (options, cb) {
    var self = this;
    return classic("timer.update", { name: this.name, changes: options }, function (err, data) {
      if (!err) copyInto(self, data);
      if (typeof cb === "function") cb(err, err ? data : self);
    });
  };
  TimerInstance.prototype.Delete = function (cb) { return classic("timer.delete", { name: this.name }, cb); };

  // the callback gets an instance on success, the error otherwise
  function instanceCallback(Make, cb) {
    return function (err, data) { if (typeof cb === "function") cb(err, err ? data : new Make(data)); };
  }
  ClearBlade.Trigger = {
    Create: function (name, options, cb) { return classic("trigger.create", { name: name, options: options }, instanceCallback(TriggerInstance, cb)); },
    Fetch: function (name, cb) { return classic("trigger.get", { name: name }, instanceCallback(TriggerInstance, cb)); },
  };
  ClearBlade.Timer = {
    Create: function (name, options, cb) { return classic("timer.create", { name: name, options: options }, instanceCallback(TimerInstance, cb)); },
    Fetch: function (name, cb) { return classic("timer.get", { name: name }, instanceCallback(TimerInstance, cb)); },
  };

  function byQuery(kind) {
    return {
      create: function (info) { return call(kind + ".create", { name: info && info.name, options: info }); },
      read: function (q) { return call(kind + "s.read", { query: plainQuery(q) }); },
      update: function (q, changes) { return call(kind + "s.update", { query: plainQuery(q), changes: changes }); },
      delete: function (q) { return call(kind + "s.delete", { query: plainQuery(q) }).then(function () {}); },
    };
  }
  ClearBladeAsync.Triggers = function () { return byQuery("trigger"); };
  ClearBladeAsync.Timers = function () { return byQuery("timer"); };
`;

export const triggers: PreludeArea = { js: js, lazy: ["ClearBlade.Timer", "ClearBlade.Trigger", "ClearBladeAsync.Timers", "ClearBladeAsync.Triggers"] };
