// The code editor (CodeMirror 6), loaded with import() by components/code.tsx: the bundler puts it
// in a chunk of its own, fetched only when a page shows code.
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import { javascript } from "@codemirror/lang-javascript";
import { bracketMatching, defaultHighlightStyle, indentOnInput, syntaxHighlighting } from "@codemirror/language";
import { EditorState } from "@codemirror/state";
import { EditorView, highlightActiveLine, keymap, lineNumbers } from "@codemirror/view";

export interface Editor { text(): string; goTo(line: number, column: number): void; destroy(): void }

export function createEditor(parent: HTMLElement, doc: string, label: string, onChange: (t: string) => void): Editor {
  const view = new EditorView({
    parent,
    state: EditorState.create({
      doc,
      extensions: [
        lineNumbers(), history(), indentOnInput(), bracketMatching(), highlightActiveLine(),
        syntaxHighlighting(defaultHighlightStyle), javascript(),
        // long lines wrap: no sideways scrolling on a phone
        EditorView.lineWrapping,
        // Tab indents; Escape then Tab leaves the editor (CodeMirror's own way out for keyboards)
        keymap.of([...defaultKeymap, ...historyKeymap, indentWithTab]),
        EditorView.contentAttributes.of({ "aria-label": label }),
        // the page's nonce (index.html): the policy admits the editor's <style> element by it
        EditorView.cspNonce.of(document.querySelector<HTMLMetaElement>('meta[name="csp-nonce"]')?.content ?? ""),
        EditorView.updateListener.of((u) => { if (u.docChanged) onChange(u.state.doc.toString()); }),
      ],
    }),
  });
  return {
    text: () => view.state.doc.toString(),
    goTo(line, column) {
      const l = view.state.doc.line(Math.min(Math.max(1, line), view.state.doc.lines));
      view.dispatch({ selection: { anchor: Math.min(l.from + Math.max(0, column - 1), l.to) }, scrollIntoView: true });
      view.focus();
    },
    destroy: () => view.destroy(),
  };
}
