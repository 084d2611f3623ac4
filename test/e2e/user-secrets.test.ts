// User secrets, black-box: /api/v/4/user_secrets/{systemKey}[/{name}] (the body is the value,
// any JSON; writes answer a string), sealed at rest (the value is nowhere in the stored data in
// clear), redacted in the audit trail, reached by users through the role permission usersecrets
// level by level, used from code through ClearBladeAsync.Secret(), and carried by a deployment to
// a real edge, which keeps it sealed under its own key.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import t from "tap";
import { J, ok, refused, run, settleAs, userWith } from "./code-run.ts";
import { Client, type DevSystem, type Outpost, devWithSystem, isErr, must, newUser, ok200, qs, request, startOutpost, storedData, uniq, waitFor } from "./harness.ts";

// error codes of src/core/errors.ts
const E = { BAD_JSON: 106, INVALID_ARGUMENT: 111, PERMISSION_DENIED: 200, NOT_AUTHORIZED_FOR_SYSTEM: 201, ALREADY_EXISTS: 207, NOT_FOUND: 208 } as const;

let o: Outpost;
let s: DevSystem;
let other: DevSystem;
t.before(async () => {
  o = await startOutpost();
  s = await devWithSystem(o, "secrets");
  other = await devWithSystem(o, "othersecrets");
});
t.teardown(() => o?.stop());

const path = (sys: DevSystem, name?: string, query?: unknown) =>
  `/api/v/4/user_secrets/${sys.systemKey}${name === undefined ? "" : `/${encodeURIComponent(name)}`}${query === undefined ? "" : `?query=${qs(query)}`}`;
/** A value no other part of a test writes: found in stored bytes only if it is kept in clear. */
const marker = () => uniq("CLEARTEXT-MARKER-");

t.test("create, read, list, update, delete: any JSON value, writes answer a string", async (t) => {
  const a = uniq("apikey"), b = uniq("account"), c = uniq("pin");
  const made = await s.dev.post(path(s, a), J("plain-text-key"));
  ok200(t, made, "create a string value");
  t.equal(typeof made.body, "string", "a write answers a string (ClearBlade's Go client reads one)");
  ok200(t, await s.dev.post(path(s, b), { client_email: "svc@example.com", private_key: "-----BEGIN-----" }), "create an object value");
  ok200(t, await s.dev.post(path(s, c), 1234), "create a number value");
  t.equal((await must(s.dev.get(path(s, a)), "read a")), "plain-text-key", "a string reads back as a JSON string");
  t.same(await must(s.dev.get(path(s, b)), "read b"), { client_email: "svc@example.com", private_key: "-----BEGIN-----" }, "an object reads back whole");
  t.equal(await must(s.dev.get(path(s, c)), "read c"), 1234, "a number reads back");
  const all = await must(s.dev.get(path(s)), "list");
  t.same(all, { [a]: "plain-text-key", [b]: { client_email: "svc@example.com", private_key: "-----BEGIN-----" }, [c]: 1234 }, "the list is {name: value}");
  const some = await must(s.dev.get(path(s, undefined, { FILTERS: [[{ EQ: [{ name: b }] }]] })), "list by query");
  t.same(Object.keys(some), [b], "a query filters on the name");
  const up = await s.dev.put(path(s, a), J("rotated"));
  ok200(t, up, "update");
  t.equal(typeof up.body, "string", "an update answers a string");
  t.equal(await must(s.dev.get(path(s, a)), "read after update"), "rotated", "the new value");
  const del = await s.dev.del(path(s, a));
  ok200(t, del, "delete");
  t.equal(typeof del.body, "string", "a delete answers a string");
  isErr(t, await s.dev.get(path(s, a)), 404, E.NOT_FOUND, "gone after delete");
  ok200(t, await s.dev.del(path(s, undefined, { FILTERS: [[{ EQ: [{ name: c }] }]] })), "delete by query");
  isErr(t, await s.dev.get(path(s, c)), 404, E.NOT_FOUND, "the matched one is gone");
  t.same(await must(s.dev.get(path(s, b)), "b stays"), { client_email: "svc@example.com", private_key: "-----BEGIN-----" }, "the unmatched one stays");
  ok200(t, await s.dev.del(path(s)), "delete all");
  t.same(await must(s.dev.get(path(s)), "list after delete all"), {}, "none left");
});

t.test("bad bodies and names, unknown secrets", async (t) => {
  const name = uniq("bad");
  isErr(t, await s.dev.post(path(s, name)), 400, E.INVALID_ARGUMENT, "no body");
  isErr(t, await s.dev.post(path(s, name), "null"), 400, E.INVALID_ARGUMENT, "a null value");
  isErr(t, await s.dev.post(path(s, name), "{oops"), 400, E.BAD_JSON, "malformed JSON");
  isErr(t, await s.dev.post(path(s, name), J("x".repeat(1024 * 1024 + 10))), 400, E.INVALID_ARGUMENT, "a value over 1 MiB");
  isErr(t, await s.dev.post(path(s, "x".repeat(300)), J("v")), 400, E.INVALID_ARGUMENT, "a name too long");
  isErr(t, await s.dev.post(path(s, "tab\there"), J("v")), 400, E.INVALID_ARGUMENT, "a name with a control character");
  isErr(t, await s.dev.get(path(s, undefined, { FILTERS: [[{ EQ: [{ sealed: "x" }] }]] })), 400, "a query on anything but the name");
  isErr(t, await s.dev.get(path(s, name)), 404, E.NOT_FOUND, "none of the failures made it");
  ok200(t, await s.dev.post(path(s, name), J("v")), "create");
  isErr(t, await s.dev.post(path(s, name), J("v2")), 400, E.ALREADY_EXISTS, "create twice");
  t.equal(await must(s.dev.get(path(s, name)), "read"), "v", "the first value stays");
  isErr(t, await s.dev.put(path(s, name), "null"), 400, E.INVALID_ARGUMENT, "update to null");
  isErr(t, await s.dev.put(path(s, uniq("missing")), J("v")), 404, E.NOT_FOUND, "update an unknown secret");
  isErr(t, await s.dev.del(path(s, uniq("missing"))), 404, E.NOT_FOUND, "delete an unknown secret");
  isErr(t, await s.dev.get(path(s, uniq("missing"))), 404, E.NOT_FOUND, "read an unknown secret");
});

t.test("another system's secrets are never reachable", async (t) => {
  const name = uniq("theirs");
  ok200(t, await other.dev.post(path(other, name), J("their-value")), "the other system's secret");
  isErr(t, await s.dev.get(path(other, name)), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "its developer's system only: read");
  isErr(t, await s.dev.get(path(other)), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "list");
  isErr(t, await s.dev.put(path(other, name), J("x")), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "update");
  isErr(t, await s.dev.del(path(other, name)), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "delete");
  isErr(t, await s.dev.del(path(other)), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "delete all");
  isErr(t, await s.dev.get(path(s, name)), 404, E.NOT_FOUND, "the same name in this system is another secret");
  const u = await userWith(s, { usersecrets: { permissions: 15 } });
  isErr(t, await u.client.get(path(other, name)), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "a user with every right in its own system: not in another");
  t.equal(await must(other.dev.get(path(other, name)), "still there"), "their-value", "nothing changed it");
});

t.test("users reach secrets through the role permission usersecrets, level by level", async (t) => {
  const name = uniq("shared");
  ok200(t, await s.dev.post(path(s, name), J("shared-value")), "a secret");
  const nobody = await newUser(s);
  isErr(t, await nobody.client.get(path(s, name)), 401, E.PERMISSION_DENIED, "a user without the permission cannot read");
  isErr(t, await nobody.client.get(path(s)), 401, E.PERMISSION_DENIED, "nor list");
  const reader = await userWith(s, { usersecrets: { permissions: 1 } });
  t.equal(await must(reader.client.get(path(s, name)), "read"), "shared-value", "read level reads");
  t.ok((await must(reader.client.get(path(s)), "list"))[name] === "shared-value", "and lists");
  isErr(t, await reader.client.post(path(s, uniq("new")), J("v")), 401, E.PERMISSION_DENIED, "read level does not create");
  isErr(t, await reader.client.put(path(s, name), J("v")), 401, E.PERMISSION_DENIED, "nor update");
  isErr(t, await reader.client.del(path(s, name)), 401, E.PERMISSION_DENIED, "nor delete");
  const writer = await userWith(s, { usersecrets: { permissions: 2 | 4 } });
  const made = uniq("byuser");
  ok200(t, await writer.client.post(path(s, made), J("v1")), "create level creates");
  ok200(t, await writer.client.put(path(s, made), J("v2")), "update level updates");
  isErr(t, await writer.client.get(path(s, made)), 401, E.PERMISSION_DENIED, "without read it cannot read");
  isErr(t, await writer.client.del(path(s, made)), 401, E.PERMISSION_DENIED, "without delete it cannot delete");
  const deleter = await userWith(s, { usersecrets: { permissions: 8 } });
  ok200(t, await deleter.client.del(path(s, made)), "delete level deletes");
  isErr(t, await s.dev.get(path(s, made)), 404, E.NOT_FOUND, "gone");
  isErr(t, await request(o.url, "GET", path(s, name)), 401, "no token at all");
});

t.test("the value is sealed at rest and redacted in the audit trail", async (t) => {
  const name = uniq("sealed"), value = marker(), updated = marker();
  ok200(t, await s.dev.post(path(s, name), { password: "p", note: value }), "create");
  ok200(t, await s.dev.put(path(s, name), J(updated)), "update");
  t.equal(await must(s.dev.get(path(s, name)), "read"), updated, "reads back opened");
  // the audit rows are written off the request's path: once both are there, everything is stored
  let rows: any[] = [];
  t.ok(await waitFor(async () => {
    rows = await must(s.dev.get(`/admin/audit/${s.systemKey}?query=${qs({ FILTERS: [[{ EQ: [{ asset_class: "usersecrets" }] }, { EQ: [{ asset_id: name }] }]] })}`), "audit");
    return rows.length >= 2;
  }), "the create and the update are in the audit trail");
  t.same(rows.map((r) => r.action_type).sort(), ["Create", "Update"], "as a create and an update");
  for (const r of rows) {
    t.notOk(r.changes.includes(value) || r.changes.includes(updated), `${r.action_type}: the value is not in the trail`);
    t.same(JSON.parse(r.changes), { value: "(redacted)" }, `${r.action_type}: recorded redacted`);
  }
  const stored = storedData(o);
  t.ok(stored.length > 0 && stored.some((f) => f.bytes.length > 0), "the stored data was read");
  // the name is stored in clear: the search finds what is there
  t.ok(stored.some((f) => f.bytes.includes(name)), "the secret's name is found in the stored data");
  for (const f of stored) {
    t.notOk(f.bytes.includes(value), `${f.name}: the first value is not in it in clear`);
    t.notOk(f.bytes.includes(updated), `${f.name}: nor the current one`);
  }
});

t.test("code services: ClearBladeAsync.Secret() with the caller's rights", async (t) => {
  const name = uniq("fromcode");
  const made = await run(s, settleAs(`ClearBladeAsync.Secret().create(${J(name)}, { user: "svc", key: "k1" })`));
  t.equal(ok(t, made, "create from code"), "(undefined)", "create resolves with nothing");
  t.same(ok(t, await run(s, settleAs(`ClearBladeAsync.Secret().read(${J(name)})`)), "read"), { user: "svc", key: "k1" }, "read answers the value");
  ok(t, await run(s, settleAs(`ClearBladeAsync.Secret().update(${J(name)}, "k2")`)), "update");
  t.equal(await must(s.dev.get(path(s, name)), "read over REST"), "k2", "the update is the REST API's value too");
  const found = ok(t, await run(s, settleAs(`ClearBladeAsync.Secret().readWithQuery(ClearBladeAsync.Query().equalTo("name", ${J(name)}))`)), "readWithQuery");
  t.same(found, [{ name, data: "k2" }], "readWithQuery answers [{name, data}]");
  refused(t, await run(s, settleAs(`ClearBladeAsync.Secret().read("no-such-secret")`)), /not found|does not exist|no-such-secret/i, undefined, "read an unknown secret");
  refused(t, await run(s, settleAs(`ClearBladeAsync.Secret().create("", 1)`)), /name/i, undefined, "create without a name");
  const reader = await userWith(s, { usersecrets: { permissions: 1 } });
  t.equal(ok(t, await run(s, settleAs(`ClearBladeAsync.Secret().read(${J(name)})`), reader.client), "a reader's run reads"), "k2", "with read");
  refused(t, await run(s, settleAs(`ClearBladeAsync.Secret().update(${J(name)}, "x")`), reader.client), /not allowed|permission/i, undefined, "a reader's run cannot update");
  const noRights = await userWith(s, {});
  refused(t, await run(s, settleAs(`ClearBladeAsync.Secret().read(${J(name)})`), noRights.client), /not allowed|permission/i, undefined, "a user without the permission: its run cannot read");
  ok(t, await run(s, settleAs(`ClearBladeAsync.Secret().deleteWithQuery(ClearBladeAsync.Query().equalTo("name", ${J(name)}))`)), "deleteWithQuery");
  isErr(t, await s.dev.get(path(s, name)), 404, E.NOT_FOUND, "gone");
});

t.test("a deployment carries a secret to a real edge, which keeps it sealed with its own key", async (t) => {
  const SLOW = 20_000;
  const name = uniq("edgesecret"), value = marker(), next = marker();
  ok200(t, await s.dev.post(path(s, name), { token: value }), "a secret on the platform");
  const edge = uniq("gw"), token = `${edge}-token`;
  await must(s.dev.post(`/admin/edges/${s.systemKey}/${edge}`, { token }), "edge record");
  const dep = uniq("withsecret");
  isErr(t, await s.dev.post(`/admin/${s.systemKey}/deployments`, { name: dep, assets: [{ asset_class: "usersecrets", asset_id: uniq("missing"), sync_to_edge: true }], edges: [edge] }), 400, "a deployment naming an unknown secret");
  ok200(t, await s.dev.post(`/admin/${s.systemKey}/deployments`, { name: dep, assets: [{ asset_class: "usersecrets", asset_id: name, sync_to_edge: true }], edges: [edge] }), "a deployment of the secret to the edge");
  const e = await startOutpost({ args: ["--mode", "edge", "--platform-url", o.url, "--system-key", s.systemKey, "--edge-name", edge, "--edge-token", token, "--sync-ping-ms", "500"] });
  t.teardown(() => e.stop());
  let ed: Client | null = null;
  t.ok(await waitFor(async () => {
    const a = await request(e.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
    if (a.status === 200) ed = new Client(e.url, { "ClearBlade-DevToken": a.body.dev_token });
    return a.status === 200;
  }, SLOW), "the developer signs in on the edge");
  const onEdge = async () => { const r = await ed!.get(path(s, name)); return r.status === 200 ? r.body : undefined; };
  t.ok(await waitFor(async () => (await onEdge())?.token === value, SLOW), "the secret reaches the edge with its value");
  t.ok(await waitFor(async () => {
    const st = await must(s.dev.get(`/admin/${s.systemKey}/sync/deployment/status/${dep}`), "status");
    return st.edges.some((x: any) => x.edge_name === edge && x.assets.some((a: any) => a.asset_class === "usersecrets" && a.asset_id === name && a.status === "synced"));
  }, SLOW, 100), "the deployment's status says the secret is synced on the edge");
  ok200(t, await s.dev.put(path(s, name), J(next)), "the value changes on the platform");
  t.ok(await waitFor(async () => (await onEdge()) === next, SLOW), "the change reaches the edge");
  // an edge keeps libSQL files whatever the platform's engine
  const edgeFiles = readdirSync(e.dataDir).filter((f) => f.startsWith("outpost.db")).map((f) => ({ name: f, bytes: readFileSync(join(e.dataDir, f)) }));
  t.ok(edgeFiles.some((f) => f.bytes.includes(name)), "the edge's files hold the secret's name");
  for (const f of edgeFiles) t.notOk(f.bytes.includes(value) || f.bytes.includes(next), `the edge's ${f.name}: the value is not in it in clear`);
  ok200(t, await s.dev.del(path(s, name)), "deleted on the platform");
  t.ok(await waitFor(async () => (await ed!.get(path(s, name))).status === 404, SLOW), "and on the edge");
});
