// Chosen device keys get their argon2id hash after the request that set them: a bulk creation
// answers without it, the devices sign in at once with their verifiers and keep doing so once the
// hashes land, a wrong key is refused at every moment, a key changed while its hash waits never
// comes back, the database never holds a key in the clear nor an unkeyed fast hash of one, and
// hashes a crash left waiting are made after the restart.
import { createHash } from "node:crypto";
import { rmSync } from "node:fs";
import t, { type Test } from "tap";
import { type DevSystem, type Outpost, devWithSystem, dropTestDb, isErr, metrics, ok200, request, startOutpost, storedData, uniq, waitFor } from "./harness.ts";

const signIn = (o: Outpost, sys: DevSystem, deviceName: string, activeKey: string) =>
  request(o.url, "POST", `/api/v/2/devices/${sys.systemKey}/auth`, { body: { deviceName, activeKey } });

/** Chosen keys whose argon2id hash is still to be made, from /metrics. */
async function waiting(o: Outpost): Promise<number> {
  const m = (await metrics(o)).text.match(/^outpost_device_key_hashes_waiting(?:\{\})? (\d+)$/m);
  if (!m) throw new Error("no outpost_device_key_hashes_waiting on /metrics");
  return Number(m[1]);
}

/** `n` devices with keys of their own (a factory secret each). */
function fleet(prefix: string, n: number) {
  return Array.from({ length: n }, (_, i) => ({ name: `${prefix}-${i}`, active_key: `factory-${prefix}-${i}-${Math.random().toString(36).slice(2)}` }));
}

async function createAll(t: Test, sys: DevSystem, devices: { name: string; active_key: string }[]) {
  const r = await sys.dev.post(`/admin/devices/${sys.systemKey}`, devices);
  ok200(t, r, `${devices.length} devices with chosen keys created in one request`);
  t.notOk(r.body.some((d: any) => "active_key" in d), "no chosen key is echoed");
}

/** Every one of `devices` signs in with its key, and none with another device's key or a near miss. */
async function allSignIn(t: Test, o: Outpost, sys: DevSystem, devices: { name: string; active_key: string }[], when: string) {
  let ok = 0, refused = 0;
  for (const [i, d] of devices.entries()) {
    if ((await signIn(o, sys, d.name, d.active_key)).status === 200) ok++;
    const other = devices[(i + 1) % devices.length]!.active_key;
    for (const wrong of [other, d.active_key + "x", d.active_key.slice(0, -1)]) if ((await signIn(o, sys, d.name, wrong)).status === 401) refused++;
  }
  t.equal(ok, devices.length, `${when}: every device signs in with its key`);
  t.equal(refused, devices.length * 3, `${when}: another device's key and near misses are refused`);
}

/** The forms an unkeyed fast hash of a key would take, and the key itself. */
function forbiddenForms(key: string): Buffer[] {
  const sha = createHash("sha256").update(key).digest();
  return [key, sha.toString("hex"), sha.toString("base64"), sha.toString("base64url"), Buffer.from(key).toString("base64"),
    createHash("sha1").update(key).digest("hex"), createHash("md5").update(key).digest("hex")].map((s) => Buffer.from(s));
}

function noKeyStored(t: Test, o: Outpost, keys: string[], when: string) {
  const files = storedData(o);
  t.ok(files.length > 0 && files.some((f) => f.bytes.length > 0), `${when}: the stored data is there to search`);
  const found = keys.filter((k) => files.some((f) => forbiddenForms(k).some((form) => f.bytes.includes(form))));
  t.same(found, [], `${when}: no key in the clear, nor its SHA-256/SHA-1/MD5, nor its base64, anywhere in the database`);
}

t.test("bulk creation with chosen keys: sign-in before and after the hashes land, nothing to guess from in the database", async (t) => {
  const o = await startOutpost();
  t.teardown(() => o.stop());
  const sys = await devWithSystem(o, "keyhash");
  const devices = fleet(uniq("bulk"), 60);
  await createAll(t, sys, devices);
  t.ok((await waiting(o)) > 0, "right after the answer, argon2id hashes are still to be made");
  // the stored data while the keys wait sealed
  noKeyStored(t, o, devices.map((d) => d.active_key), "while the hashes wait");
  await allSignIn(t, o, sys, devices.slice(0, 10), "right after creation");
  t.ok(await waitFor(async () => (await waiting(o)) === 0, 120_000, 200), "every hash lands");
  await allSignIn(t, o, sys, devices, "after the hashes landed");
  noKeyStored(t, o, devices.map((d) => d.active_key), "after the hashes landed");
  // the record tells that the device has a key, never the key nor its hash
  const got = await sys.dev.get(`/admin/devices/${sys.systemKey}/${devices[0]!.name}`);
  ok200(t, got);
  t.notMatch(got.text, /pending\$|argon2id|sha256\$/, "no stored form of a key on the wire");
});

t.test("a chosen key changed while its hash waits, and afterwards: only the newest key signs in", async (t) => {
  const o = await startOutpost();
  t.teardown(() => o.stop());
  const sys = await devWithSystem(o, "keyhash");
  const name = uniq("rot");
  ok200(t, await sys.dev.post(`/admin/devices/${sys.systemKey}/${name}`, { active_key: "first-chosen-key" }), "created with a chosen key");
  ok200(t, await sys.dev.put(`/admin/devices/${sys.systemKey}/${name}`, { active_key: "second-chosen-key" }), "key changed at once");
  ok200(t, await signIn(o, sys, name, "second-chosen-key"), "the new key signs in before its hash lands");
  isErr(t, await signIn(o, sys, name, "first-chosen-key"), 401, "the old key is refused before any hash lands");
  t.ok(await waitFor(async () => (await waiting(o)) === 0, 60_000, 100), "the waiting hash lands (the replaced key's job is gone)");
  ok200(t, await signIn(o, sys, name, "second-chosen-key"), "the new key signs in after its hash landed");
  isErr(t, await signIn(o, sys, name, "first-chosen-key"), 401, "the old key stays refused");
  ok200(t, await sys.dev.put(`/admin/devices/${sys.systemKey}/${name}`, { active_key: "third-chosen-key" }), "changed again after the hash landed");
  ok200(t, await signIn(o, sys, name, "third-chosen-key"), "the third key signs in");
  isErr(t, await signIn(o, sys, name, "second-chosen-key"), 401, "the second key is refused");
  // rotating keys the server generates replace the chosen one, waiting hash or not
  ok200(t, await sys.dev.put(`/admin/devices/${sys.systemKey}/${name}`, { active_key: "fourth-chosen-key" }), "a fourth chosen key");
  const rot = await sys.dev.post(`/admin/devices/keys/${sys.systemKey}/${name}`, { count: 1 });
  ok200(t, rot, "rotating keys generated");
  t.equal(await waiting(o), 0, "generated keys leave no hash waiting for the replaced chosen key");
  ok200(t, await signIn(o, sys, name, rot.body.keys[0]), "the generated key signs in");
  isErr(t, await signIn(o, sys, name, "fourth-chosen-key"), 401, "the replaced chosen key is refused");
  // a device deleted while its hash waits takes its job along
  const gone = uniq("gone");
  ok200(t, await sys.dev.post(`/admin/devices/${sys.systemKey}/${gone}`, { active_key: "deleted-device-key" }));
  ok200(t, await sys.dev.del(`/admin/devices/${sys.systemKey}/${gone}`), "deleted at once");
  t.equal(await waiting(o), 0, "nothing waits for a deleted device");
  isErr(t, await signIn(o, sys, gone, "deleted-device-key"), 401, "a deleted device does not sign in");
});

t.test("refused creations leave no device and no waiting hash", async (t) => {
  const o = await startOutpost();
  t.teardown(() => o.stop());
  const sys = await devWithSystem(o, "keyhash");
  const p = uniq("bad");
  const base = `/admin/devices/${sys.systemKey}`;
  const r1 = await sys.dev.post(base, [{ name: `${p}-a`, active_key: "good-chosen-key" }, { name: `${p}-b`, active_key: "short" }]);
  isErr(t, r1, 400, "a key shorter than 6 characters refuses the batch");
  t.match(String(r1.body?.error?.detail ?? ""), /\[1\]/, "the error names the entry");
  const r2 = await sys.dev.post(base, [{ name: `${p}-c`, active_key: "good-chosen-key" }, { name: `${p}-c`, active_key: "other-chosen-key" }]);
  isErr(t, r2, 400, "a name twice refuses the batch");
  isErr(t, await sys.dev.post(base, [{ name: `${p}-d`, active_key: 123456 }]), 400, "a key that is not a string");
  ok200(t, await sys.dev.post(`${base}/${p}-e`, { active_key: "existing-chosen-key" }), "one device");
  const r3 = await sys.dev.post(base, [{ name: `${p}-f`, active_key: "good-chosen-key" }, { name: `${p}-e`, active_key: "again-chosen-key" }]);
  isErr(t, r3, 400, "a batch naming an existing device");
  t.match(String(r3.body?.error?.detail ?? ""), /\[1\]: device .* already exists/, "the error names the entry");
  isErr(t, await sys.dev.put(`${base}/${p}-e`, { active_key: "tiny" }), 400, "a short key on update");
  ok200(t, await signIn(o, sys, `${p}-e`, "existing-chosen-key"), "the refused update left the key as it was");
  isErr(t, await request(o.url, "POST", base, { body: [{ name: `${p}-g`, active_key: "anonymous-key" }] }), 401, "no token");
  for (const n of ["a", "b", "c", "d", "f", "g"]) isErr(t, await sys.dev.get(`${base}/${p}-${n}`), 404, `${p}-${n} was not created`);
  t.ok(await waitFor(async () => (await waiting(o)) === 0, 30_000, 100), "only the created device's hash was queued, and it landed");
  ok200(t, await signIn(o, sys, `${p}-e`, "existing-chosen-key"), "the device signs in after its hash landed");
});

t.test("a crash with hashes waiting: they are made after the restart, and sign-in works throughout", async (t) => {
  let o = await startOutpost({ keepData: true });
  const dir = o.dataDir;
  t.teardown(async () => { await o.stop(); await dropTestDb(dir); rmSync(dir, { recursive: true, force: true }); });
  const sys = await devWithSystem(o, "keyhash");
  const devices = fleet(uniq("crash"), 120);
  await createAll(t, sys, devices);
  const before = await waiting(o);
  t.ok(before > 0, `hashes waiting at the crash (${before})`);
  await o.kill();
  o = await startOutpost({ dataDir: dir, keepData: true });
  // the restarted node picks the jobs up; until they are done the verifiers answer
  await allSignIn(t, o, sys, devices.slice(0, 10), "right after the restart");
  t.ok(await waitFor(async () => (await waiting(o)) === 0, 180_000, 250), "every hash left waiting lands after the restart");
  await allSignIn(t, o, sys, devices, "after the hashes landed");
  noKeyStored(t, o, devices.map((d) => d.active_key), "after the restart");
});
