// A code editor: CodeMirror, loaded on first use (its chunk is most of the console's size). Until
// it is there, and if it cannot load, a plain textarea with the same label edits the code.
// The editor owns its text once it is up (uncontrolled): `value` is the text it starts from, and
// every change goes out through onChange; a page that loads other code remounts it (a new key).
import { useEffect, useRef, useState } from "preact/hooks";
import type { Editor } from "../editor.ts";

export function CodeEditor({ id, label, value, onChange, goTo }: {
  id: string; label: string; value: string; onChange: (t: string) => void;
  /** where to put the cursor (a compile error's line and column) */
  goTo?: { line: number; column: number };
}) {
  const box = useRef<HTMLDivElement>(null);
  const editor = useRef<Editor | undefined>(undefined);
  const [ready, setReady] = useState(false);
  const latest = useRef({ value, onChange });
  latest.current = { value, onChange };
  useEffect(() => {
    let gone = false;
    import("../editor.ts").then((m) => {
      if (gone || !box.current) return;
      // what was typed into the textarea meanwhile carries over
      editor.current = m.createEditor(box.current, latest.current.value, label, (t) => latest.current.onChange(t));
      setReady(true);
    }, () => { /* the textarea stays */ });
    return () => { gone = true; editor.current?.destroy(); };
  }, []);
  useEffect(() => { if (goTo && editor.current) editor.current.goTo(goTo.line, goTo.column); }, [goTo]);
  return <div class="code-editor" id={id} data-ready={ready ? "true" : "false"}>
    <div ref={box} />
    {ready ? null : <textarea aria-label={label} value={value} rows={12} onInput={(e) => onChange(e.currentTarget.value)} />}
  </div>;
}
