// User secrets from code: ClearBladeAsync.Secret(): create(name, data), read(name) answering the
// value, readWithQuery(query) answering [{name, data}], update(name, data), delete(name),
// deleteWithQuery(query). A query filters on the secret's name.
import type { PreludeArea } from "./area.ts";

const js = String.raw`
  ClearBladeAsync.Secret = function () {
    return {
      create: function (name, data) { return call("secrets.create", { name: name, data: data }).then(function () {}); },
      read: function (name) { return call("secrets.read", { name: name }); },
      readWithQuery: function (query) { return call("secrets.readWithQuery", { query: query ? plainQuery(query) : null }); },
      update: function (name, data) { return call("secrets.update", { name: name, data: data }).then(function () {}); },
      delete: function (name) { return call("secrets.delete", { name: name }).then(function () {}); },
      deleteWithQuery: function (query) { return call("secrets.deleteWithQuery", { query: query ? plainQuery(query) : null }).then(function () {}); },
    };
  };
`;

export const secrets: PreludeArea = { js: js, lazy: ["ClearBladeAsync.Secret"] };
