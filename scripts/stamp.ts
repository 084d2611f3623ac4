// The version and commit a build is stamped with (scripts/build.ts puts them in the binary,
// scripts/package.ts in the packages): package.json's version and `git rev-parse --short HEAD`
// ("-dirty" added when tracked files differ from that commit), or OUTPOST_VERSION and
// OUTPOST_COMMIT when set (a release pipeline, a build outside git).
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "..");

export interface Stamp { version: string; commit: string }

export function buildStamp(env: Record<string, string | undefined> = process.env): Stamp {
  const version = env.OUTPOST_VERSION || (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
  // Debian's rule for an upstream version (the .deb carries it): a digit first, then these
  if (!/^\d[A-Za-z0-9.+~-]*$/.test(version)) throw new Error(`version '${version}': it must start with a digit and hold only letters, digits and . + ~ -`);
  let commit = env.OUTPOST_COMMIT || "";
  if (!commit) {
    const git = (...args: string[]) => Bun.spawnSync(["git", ...args], { cwd: ROOT, stdout: "pipe", stderr: "ignore" });
    const head = git("rev-parse", "--short", "HEAD");
    commit = head.exitCode === 0 ? head.stdout.toString().trim() : "unknown";
    if (head.exitCode === 0 && git("diff", "--quiet", "HEAD", "--").exitCode === 1) commit += "-dirty";
  }
  if (!/^[A-Za-z0-9._+-]{1,64}$/.test(commit)) throw new Error(`commit '${commit}': letters, digits and . _ + - only`);
  return { version, commit };
}
