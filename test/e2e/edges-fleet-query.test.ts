// The edges list's fleet parameters (failing, view=fleet), the count by link state, and their
// conditional answers (ETag, If-None-Match -> 304), with bad values refused in the error envelope.
import t from "tap";
import { devWithSystem, isErr, must, ok200, qs, request, startOutpost } from "./harness.ts";

const o = await startOutpost();
t.teardown(() => o.stop());
const s = await devWithSystem(o, "fleet-query");
const SK = s.systemKey;
for (const name of ["north-1", "north-2", "south-1"]) await must(s.dev.post(`/admin/edges/${SK}/${name}`, { description: name }), `edge ${name}`);

t.test("view=fleet and failing on the list", async (t) => {
  const all = await s.dev.get(`/admin/edges/${SK}?view=fleet`);
  ok200(t, all, "list with sync counts");
  t.same(all.body.map((e: any) => e.name), ["north-1", "north-2", "south-1"], "every edge");
  const { sync_lag, ...row } = all.body[0];
  t.same(row, { name: "north-1", description: "north-1", template: "", isConnected: false, first_talked: null, last_talked: null, sync_counts: { pending: 0, synced: 0, failed: 0 } },
    "each as a fleet row: link, contact and its assets by status");
  t.ok(sync_lag === null || typeof sync_lag === "number", `and its sync lag (${sync_lag})`);
  t.equal(all.body[0].system_secret, undefined, "not the whole record (no system secret)");
  t.ok(all.headers.etag, "an ETag");
  const plain = await s.dev.get(`/admin/edges/${SK}`);
  t.equal(plain.body[0].sync_counts, undefined, "without the parameter: the record as before");
  t.equal(plain.headers.etag, undefined, "and no ETag");
  t.same((await s.dev.get(`/admin/edges/${SK}?failing=true`)).body, [], "failing=true: none has a failed asset");
  t.equal((await s.dev.get(`/admin/edges/${SK}?failing=false`)).body.length, 3, "failing=false: all three");
  const paged = await s.dev.get(`/admin/edges/${SK}?failing=false&query=${qs({ FILTERS: [[{ RE: [{ name: "^north" }] }]], SORT: [{ DESC: "name" }], PAGESIZE: 1, PAGENUM: 2 })}`);
  t.same(paged.body.map((e: any) => e.name), ["north-1"], "with the query language: filter, sort and page");
  const n = await s.dev.get(`/api/v/3/edges/${SK}/count?failing=true&query=${qs({ FILTERS: [[{ RE: [{ name: "^north" }] }]] })}`);
  t.same(n.body, { count: 0 }, "count takes failing too");
  t.same((await s.dev.get(`/api/v/3/edges/${SK}/count?failing=false`)).body, { count: 3 }, "count failing=false");
});

t.test("count by link state", async (t) => {
  const c = await s.dev.get(`/api/v/3/edges/${SK}/count?by=state`);
  ok200(t, c, "by=state");
  t.same(c.body, { count: 3, connected: 0, never_connected: 3, disconnected: 0, failing: 0 }, "three edges, never connected");
  t.same((await s.dev.get(`/api/v/3/edges/${SK}/count`)).body, { count: 3 }, "without by: as before");
});

t.test("conditional answers: 304 while nothing changed, 200 once it did", async (t) => {
  const path = `/admin/edges/${SK}?view=fleet`;
  const first = await s.dev.get(path);
  const tag = first.headers.etag as string;
  const again = await s.dev.get(path, { "If-None-Match": tag });
  t.equal(again.status, 304, "the same answer: 304");
  t.equal(again.text, "", "with no body");
  t.equal(again.headers.etag, tag, "and the same ETag");
  t.equal((await s.dev.get(path, { "If-None-Match": `"other", ${tag}` })).status, 304, "a list of tags naming it");
  t.equal((await s.dev.get(path, { "If-None-Match": '"stale"' })).status, 200, "another tag: the answer");
  const counts = await s.dev.get(`/api/v/3/edges/${SK}/count?by=state`);
  t.equal((await s.dev.get(`/api/v/3/edges/${SK}/count?by=state`, { "If-None-Match": counts.headers.etag as string })).status, 304, "counts: 304 too");
  ok200(t, await s.dev.put(`/admin/edges/${SK}/north-2`, { description: "changed" }), "an edge changes");
  const changed = await s.dev.get(path, { "If-None-Match": tag });
  t.equal(changed.status, 200, "the list changed: 200");
  t.not(changed.headers.etag, tag, "with a new ETag");
  ok200(t, await s.dev.post(`/admin/edges/${SK}/west-1`, {}), "an edge added");
  const recount = await s.dev.get(`/api/v/3/edges/${SK}/count?by=state`, { "If-None-Match": counts.headers.etag as string });
  t.equal(recount.status, 200, "counts changed: 200");
  t.equal(recount.body.never_connected, 4, "four never connected");
});

t.test("bad values are refused in the error envelope", async (t) => {
  isErr(t, await s.dev.get(`/admin/edges/${SK}?failing=yes`), 400, "failing=yes");
  isErr(t, await s.dev.get(`/admin/edges/${SK}?view=full`), 400, "view=full");
  isErr(t, await s.dev.get(`/api/v/3/edges/${SK}/count?failing=maybe`), 400, "count failing=maybe");
  isErr(t, await s.dev.get(`/api/v/3/edges/${SK}/count?by=region`), 400, "by=region");
  isErr(t, await s.dev.get(`/api/v/3/edges/${SK}/count?by=state&failing=true`), 400, "by=state with failing");
  isErr(t, await s.dev.get(`/api/v/3/edges/${SK}/count?by=state&query=${qs({ FILTERS: [] })}`), 400, "by=state with a query");
  isErr(t, await s.dev.get(`/admin/edges/${SK}?failing=true&query=${qs({ FILTERS: [[{ LIKE: [{ name: "x" }] }]] })}`), 400, "a bad query with failing");
  isErr(t, await s.dev.get(`/admin/edges/${SK}?failing=true&query=${qs({ FILTERS: [[{ EQ: [{ nosuch: 1 }] }]] })}`), 400, "an unknown column");
  isErr(t, await request(o.url, "GET", `/api/v/3/edges/${SK}/count?by=state`), 401, "no token");
  const other = await devWithSystem(o, "other");
  const foreign = await other.dev.get(`/admin/edges/${SK}?view=fleet`);
  t.ok(foreign.status >= 400 && foreign.status < 500, `another developer's system is refused (${foreign.status})`);
  t.ok(foreign.body?.error, "in the envelope");
});
