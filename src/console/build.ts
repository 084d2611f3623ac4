// Builds the console (ui/) into the files the server hands out: index.html, one minified script
// bundle and one stylesheet. Used by scripts/build.ts (the binary embeds the result) and, run from
// source, on the first request for the console.
import { join } from "node:path";

export type ConsoleFiles = Record<string, { type: string; body: string }>;

export async function buildConsole(): Promise<ConsoleFiles> {
  const dir = join(import.meta.dir, "ui");
  const r = await Bun.build({ entrypoints: [join(dir, "app.ts")], target: "browser", format: "esm", minify: true });
  if (!r.success || !r.outputs[0]) throw new Error(`console build failed: ${r.logs.map(String).join("\n")}`);
  return {
    "index.html": { type: "text/html; charset=utf-8", body: await Bun.file(join(dir, "index.html")).text() },
    "app.js": { type: "text/javascript; charset=utf-8", body: await r.outputs[0].text() },
    "app.css": { type: "text/css; charset=utf-8", body: await Bun.file(join(dir, "app.css")).text() },
  };
}
