// Bundles black-box test files for Node (tap cannot run inside Bun, and Node 20 cannot run
// TypeScript by itself): each file to <outdir>/<its path under root>.mjs. A file that does not
// compile is an answer with its messages, never a throw: Bun.build throws on some errors (a name
// declared twice) instead of answering success: false, which ended the test run without its
// closing line.
export async function bundleE2E(entrypoints: string[], outdir: string, root: string): Promise<{ ok: boolean; logs: unknown[] }> {
  try {
    const built = await Bun.build({ entrypoints, outdir, root, target: "node", format: "esm", splitting: true, naming: "[dir]/[name].mjs", packages: "external" });
    return { ok: built.success, logs: built.logs };
  } catch (e) {
    // an AggregateError ("Bundle failed") whose errors are the messages
    return { ok: false, logs: e instanceof AggregateError ? e.errors : [e] };
  }
}
