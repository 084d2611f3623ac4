// Deployments from code: ClearBlade.Deployment() (callbacks) and ClearBladeAsync.Deployment()
// (promises): create(name, description, {assets, edges}), read(name), readAll(query), update(name,
// {assets: {add, remove}, edges: {add, remove}}) answering the whole deployment, delete(name).
import type { PreludeArea } from "./area.ts";

const js = String.raw`
  ClearBlade.Deployment = function () {
    return {
      create: function (name, description, options, cb) { return classic("deployments.create", { name: name, description: description, options: options }, cb); },
      read: function (name, cb) { return classic("deployments.read", { name: name }, cb); },
      readAll: function (query, cb) { if (typeof query === "function") { cb = query; query = null; } return classic("deployments.readAll", { query: query ? plainQuery(query) : null }, cb); },
      update: function (name, changes, cb) { return classic("deployments.update", { name: name, changes: changes }, cb); },
      delete: function (name, cb) { return classic("deployments.delete", { name: name }, cb); },
    };
  };
  ClearBladeAsync.Deployment = function () {
    return {
      create: function (name, description, options) { return call("deployments.create", { name: name, description: description, options: options }); },
      read: function (name) { return call("deployments.read", { name: name }); },
      readAll: function (query) { return call("deployments.readAll", { query: query ? plainQuery(query) : null }); },
      update: function (name, changes) { return call("deployments.update", { name: name, changes: changes }); },
      delete: function (name) { return call("deployments.delete", { name: name }).then(function () {}); },
    };
  };
`;

export const deployments: PreludeArea = { js: js, lazy: ["ClearBlade.Deployment", "ClearBladeAsync.Deployment"] };
