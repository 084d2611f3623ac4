// Users: ClearBlade.User and ClearBladeAsync.Users.
import type { LibraryArea } from "./types.ts";
import { queryText } from "./types.ts";

const js = String.raw`
  ClearBlade.User = function () {
    return {
      getUser: function (cb) { return classic("user.get", null, cb); },
      setUser: function (data, cb) { return classic("user.set", { data: data }, cb); },
      allUsers: function (query, cb) { if (typeof query === "function") { cb = query; query = null; } return classic("user.list", { query: plainQuery(query) }, cb); },
      count: function (query, cb) { if (typeof query === "function") { cb = query; query = null; } return classic("user.count", { query: plainQuery(query) }, cb); },
    };
  };
  ClearBladeAsync.Users = function () {
    return {
      read: function (q) { return call("user.list", { query: plainQuery(q) }); },
      count: function (q) { return call("user.count", { query: plainQuery(q) }); },
    };
  };
`;

export const users: LibraryArea = {
  js,
  ops: {
    "user.get": (x) => x.e.users.info(x.p),
    "user.set": (x, a) => x.e.users.updateInfo(x.p, a.data ?? {}),
    "user.list": (x, a) => x.e.users.list(x.p, queryText(a.query) ?? null, x.systemKey),
    "user.count": (x, a) => x.e.users.count(x.p, queryText(a.query) ?? null, x.systemKey),
  },
};
