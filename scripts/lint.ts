// npm run lint (and the first step of npm test): Biome's linter with biome.json's rules.
// The platform's Biome binary is an optional dependency of its own (@biomejs/cli-linux-x64 or
// -arm64) rather than the @biomejs/biome wrapper, whose optional binaries for every platform a
// lock file must list even where a registry does not carry them.
import { existsSync } from "node:fs";
import { join } from "node:path";

const bin = join(import.meta.dir, "..", "node_modules", "@biomejs", `cli-${process.platform}-${process.arch}`, "biome");
if (!existsSync(bin)) {
  console.log(`lint skipped: no Biome binary for ${process.platform}-${process.arch} (optional dependency @biomejs/cli-${process.platform}-${process.arch})`);
  process.exit(0);
}
const p = Bun.spawnSync([bin, "lint", ...process.argv.slice(2)], { stdio: ["inherit", "inherit", "inherit"], cwd: join(import.meta.dir, "..") });
process.exit(p.exitCode ?? 1);
