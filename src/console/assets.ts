// The console's files. The binary carries them built: scripts/build.ts puts a module holding the
// built text in place of this one. Run from source, they are built on first use.
import type { ConsoleFiles } from "./build.ts";

let built: Promise<ConsoleFiles> | undefined;

export function consoleAssets(): Promise<ConsoleFiles> {
  return (built ??= import("./build.ts").then((m) => m.buildConsole()));
}
