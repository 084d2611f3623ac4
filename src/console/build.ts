// Builds the console (ui/) into the files the server hands out: index.html, the minified script
// bundle (Preact and the pages), the code editor's chunk (CodeMirror, loaded with import() when a
// page shows code) and one stylesheet. Used by scripts/build.ts (the binary embeds the result)
// and, run from source, on the first request for the console.
import { basename, join } from "node:path";

/** A file's text (`body`), or its gzip as base64 (`gzip`: the scripts and the stylesheet, a third
 *  of their size in the binary, and sent as they are to browsers, which all take gzip). */
export type ConsoleFiles = Record<string, { type: string; body?: string; gzip?: string }>;

const gzipped = (text: string) => Buffer.from(Bun.gzipSync(text, { level: 9 })).toString("base64");

export async function buildConsole(): Promise<ConsoleFiles> {
  const dir = join(import.meta.dir, "ui");
  const r = await Bun.build({
    entrypoints: [join(dir, "app.tsx")], target: "browser", format: "esm", minify: true, splitting: true,
    jsx: { runtime: "automatic", importSource: "preact" },
    naming: { entry: "app.[ext]", chunk: "chunk-[hash].[ext]" },
  } as Parameters<typeof Bun.build>[0]);
  if (!r.success || !r.outputs.length) throw new Error(`console build failed: ${r.logs.map(String).join("\n")}`);
  const files: ConsoleFiles = {
    "index.html": { type: "text/html; charset=utf-8", body: await Bun.file(join(dir, "index.html")).text() },
    "app.css": { type: "text/css; charset=utf-8", gzip: gzipped(await Bun.file(join(dir, "app.css")).text()) },
  };
  for (const o of r.outputs) if (o.kind === "entry-point" || o.kind === "chunk") files[basename(o.path)] = { type: "text/javascript; charset=utf-8", gzip: gzipped(await o.text()) };
  if (!files["app.js"]) throw new Error("console build failed: no app.js");
  return files;
}
