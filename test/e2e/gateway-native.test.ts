// A gateway whose /tmp is mounted noexec: the database engine's addon cannot be loaded from
// $TMPDIR, so it goes to the data directory; --help never needs it; where nothing can load it, a
// message and exit 2, never a stack trace. Needs root to mount a noexec tmpfs.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { needs, request, runBin, startOutpost } from "./harness.ts";

const NO_STACK = /\bat \S+:\d+:\d+/;
const root = mkdtempSync(join(tmpdir(), "outpost-noexec-"));
const noexec = join(root, "mnt");
mkdirSync(noexec);
const mounted = spawnSync("mount", ["-t", "tmpfs", "-o", "noexec,size=64m", "tmpfs", noexec]).status === 0;
t.teardown(() => {
  if (mounted) spawnSync("umount", ["-l", noexec]);
  rmSync(root, { recursive: true, force: true });
});
const opts = await needs("mounting a noexec tmpfs (root, and mount permitted)", mounted);

t.test("with TMPDIR on a noexec mount: --help works, the engine loads from the data directory", opts, async (t) => {
  const tmp = join(noexec, "tmp");
  mkdirSync(tmp, { recursive: true });
  const h = await runBin(["--help"], { env: { TMPDIR: tmp } });
  t.equal(h.code, 0, "--help exits 0");
  t.match(h.stdout, /--mode platform\|edge/);
  t.equal(h.stderr, "", "and says nothing else");

  const o = await startOutpost({ env: { TMPDIR: tmp } });
  t.teardown(() => o.stop());
  t.equal((await request(o.url, "POST", "/admin/reg", { body: { email: "noexec@example.com", password: "pw-123456", fname: "a", lname: "b", org: "c" } })).status, 200, "the database works");
  const native = join(o.dataDir, "native");
  t.ok(existsSync(native) && readdirSync(native).some((f) => f.endsWith(".node")), "the addon went to <data-dir>/native");
});

t.test("nowhere to load the engine from: exit 2 with a message, no stack trace", opts, async (t) => {
  const tmp = join(noexec, "tmp2"), data = join(noexec, "data");
  mkdirSync(tmp, { recursive: true });
  const r = await runBin(["--data-dir", data, "--http-port", "0", "--mqtt-port", "0", "--mqtt-ws-port", "0"], { env: { TMPDIR: tmp } });
  t.equal(r.code, 2, "exit 2");
  t.match(r.stderr, /cannot load the database engine/);
  t.match(r.stderr, /noexec/, "says what to do");
  t.notMatch(r.stderr, NO_STACK, "no stack trace");
});
