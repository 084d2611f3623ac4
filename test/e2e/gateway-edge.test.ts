// An edge's token from a file or the environment: the edge connects with it, and it is not on the
// command line (/proc/<pid>/cmdline, which every local user can read).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { devWithSystem, startOutpost, uniq, waitFor } from "./harness.ts";

const dir = mkdtempSync(join(tmpdir(), "outpost-gw-edge-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const platform = await startOutpost();
t.teardown(() => platform.stop());
const s = await devWithSystem(platform, "gateway-edges");

async function edgeWith(how: "file" | "env") {
  const name = uniq("gw"), token = `token-${uniq("t")}-0123456789`;
  const c = await s.dev.post(`/admin/edges/${s.systemKey}/${name}`, { token });
  if (c.status !== 200) throw new Error(`create edge: ${c.text}`);
  const tokenFile = join(dir, `${name}.token`);
  writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
  const edge = await startOutpost({
    args: ["--mode", "edge", "--platform-url", platform.url, "--system-key", s.systemKey, "--edge-name", name, ...(how === "file" ? ["--edge-token-file", tokenFile] : [])],
    env: how === "env" ? { OUTPOST_EDGE_TOKEN: token } : {},
  });
  return { name, token, edge };
}

for (const how of ["file", "env"] as const) {
  t.test(`the edge token from ${how === "file" ? "--edge-token-file" : "OUTPOST_EDGE_TOKEN"}: connects, and is not in /proc/<pid>/cmdline`, async (t) => {
    const { name, token, edge } = await edgeWith(how);
    t.teardown(() => edge.stop());
    t.ok(await waitFor(async () => (await s.dev.get(`/admin/edges/${s.systemKey}/${name}`)).body?.isConnected === true, 15_000), "the platform sees the edge connected");
    const cmdline = readFileSync(`/proc/${edge.proc.pid}/cmdline`, "utf8");
    t.match(cmdline, /--edge-name/, "the command line was read");
    t.notOk(cmdline.includes(token), "the token is not on the command line");
  });
}
