// Users: ClearBlade.User, the classic sign-in calls (loginUser, registerUser, loginAnon, setUser,
// reauthUser, logoutUser, isCurrentUserAuthenticated), deleteUser(s), ClearBladeAsync.Users and
// ClearBladeAsync.Auth. A sign-in from code is the REST sign-in with the system's own key and
// secret: it yields a session of the user whose password (or token) the code holds, never more.
// Failed sign-ins lock an account out from code by the rule of the REST device and developer
// sign-ins (3 failures lock it for 60 s, doubling up to 600 s; counted apart from REST's), and a
// run may open a bounded number of sessions.
import type { PreludeArea } from "./area.ts";

const js = String.raw`
  ClearBlade.User = function () {
    return {
      getUser: function (cb) { return classic("user.get", null, cb); },
      setUser: function (data, cb) { return classic("user.set", { data: data }, cb); },
      setUsers: function (query, changes, cb) { return classic("users.update", { query: plainQuery(query), changes: changes }, cb); },
      allUsers: function (query, cb) { if (typeof query === "function") { cb = query; query = null; } return classic("user.list", { query: plainQuery(query) }, cb); },
      count: function (query, cb) { if (typeof query === "function") { cb = query; query = null; } return classic("user.count", { query: plainQuery(query) }, cb); },
    };
  };
  // ClearBlade.init: the run's own system always; with email and password it signs in as that
  // user (registerUser: registers them first), with useUser it acts as that token's holder, and
  // the calls after it act as them. A sign-in that fails reaches the callback as (true, error),
  // or, without one, is thrown: never a session it did not open. Plain init keeps the caller.
  ClearBlade.init = function (opts) {
    var cb = opts && typeof opts.callback === "function" ? opts.callback : null;
    if (!opts || typeof opts !== "object") return undefined;
    if (typeof opts.systemKey === "string" && currentReq && opts.systemKey !== currentReq.systemKey)
      return refused(cb, "ClearBlade.init: a service reaches its own system only (systemKey is another system's)");
    if (opts.useUser && typeof opts.useUser === "object") {
      var token = opts.useUser.authToken;
      if (typeof token !== "string" || !token) return refused(cb, "ClearBlade.init: useUser needs an authToken");
      return initAs("user.setToken", { email: typeof opts.useUser.email === "string" ? opts.useUser.email : null, token: token }, cb);
    }
    if (opts.email !== undefined || opts.password !== undefined || opts.registerUser)
      return initAs(opts.registerUser ? "user.register" : "user.login", { email: opts.email, password: opts.password }, cb);
    if (cb) cb(false, {});
  };
  // a classic call whose failure, without a callback, is thrown (init's: it must not go unseen)
  function initAs(op, args, cb) {
    if (cb) return classic(op, args, cb);
    var r = JSON.parse(hostSync(op, JSON.stringify(args)));
    if (!r.ok) throw errorOf(r.error);
    return new Settled(r.data);
  }
  ClearBlade.loginUser = function (email, password, cb) { return classic("user.login", { email: email, password: password }, cb); };
  ClearBlade.registerUser = function (email, password, cb) { return classic("user.register", { email: email, password: password }, cb); };
  ClearBlade.loginAnon = function (cb) { return classic("user.loginAnon", null, cb); };
  ClearBlade.reauthUser = function (token, refreshToken, cb) { return classic("user.reauth", { token: token, refreshToken: refreshToken }, cb); };
  ClearBlade.logoutUser = function (cb) { return classic("user.logout", null, cb); };
  ClearBlade.isCurrentUserAuthenticated = function (cb) { return classic("user.checkAuth", null, cb); };
  // later calls act as the token's holder once this has run
  ClearBlade.setUser = function (email, token, cb) { return classic("user.setToken", { email: email, token: token }, cb); };
  ClearBlade.deleteUser = function (user, cb) { return classic("user.delete", { users: [user] }, cb); };
  ClearBlade.deleteUsers = function (users, cb) { return classic("user.delete", { users: users }, cb); };

  ClearBladeAsync.Users = function () {
    return {
      create: function (info) { return call("users.create", { info: info }); },
      // the users themselves, as the other async reads answer rows (the classic allUsers keeps
      // the list's {Data, Total})
      read: function (q) { return call("user.list", { query: plainQuery(q) }).then(function (r) { return r && Array.isArray(r.Data) ? r.Data : r; }); },
      update: function (q, changes) { return call("users.update", { query: plainQuery(q), changes: changes }).then(function () {}); },
      delete: function (q) { return call("users.delete", { query: plainQuery(q) }).then(function () {}); },
      count: function (q) { return call("user.count", { query: plainQuery(q) }); },
      userConnections: notProvided("ClearBladeAsync.Users().userConnections"),
    };
  };
  ClearBladeAsync.Auth = function () {
    return {
      authAnon: function () { return call("auth.anon", null); },
      authUser: function (email, password) { return call("auth.user", { email: email, password: password }); },
      authDevice: function (name, key) { return call("auth.device", { name: name, key: key }); },
      reauth: function (refreshToken, accessToken) { return call("auth.reauth", { refreshToken: refreshToken, token: accessToken }); },
      impersonateUser: function (userID) { return call("auth.impersonate", { user: userID }); },
      userIDFromToken: function (token) { return call("auth.whose", { token: token }); },
    };
  };
`;

export const users: PreludeArea = { js: js };
