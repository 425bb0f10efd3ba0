// Source of assets/runner/editor.js, the runner's code editor: CodeMirror 6 with Python highlighting,
// indentation, undo/redo, bracket matching and closing, line numbers; long lines wrap (a phone's
// column is narrow). Bundled by build-editor.mjs
// (esbuild, npm packages pinned in package.json); runner.js loads the bundle with import().
//
// Keys: Ctrl/Cmd+Enter run, Ctrl/Cmd+Shift+Enter check, Tab / Shift+Tab indent, Esc then Tab leaves
// the editor (CodeMirror's tab-focus mode), Ctrl/Cmd+Z / Ctrl/Cmd+Shift+Z (or Ctrl+Y) undo / redo.
// Input methods (拼音) compose through CodeMirror's own composition handling.
import { closeBrackets, closeBracketsKeymap } from "@codemirror/autocomplete";
import { defaultKeymap, history, historyKeymap, indentWithTab, redo } from "@codemirror/commands";
import { python } from "@codemirror/lang-python";
import {
  bracketMatching, defaultHighlightStyle, indentOnInput, indentUnit, syntaxHighlighting,
} from "@codemirror/language";
import { EditorState } from "@codemirror/state";
import {
  EditorView, drawSelection, highlightActiveLine, highlightActiveLineGutter, highlightSpecialChars, keymap,
  lineNumbers,
} from "@codemirror/view";

// Everything the layout needs is set here, so the host page's CSS (Bootstrap, JupyterLab) cannot
// shrink or restyle the editor; runner.css only sets colours and the outer border.
const layout = EditorView.theme({
  "&": { width: "100%", boxSizing: "border-box", textAlign: "left", fontSize: "0.88rem" },
  ".cm-scroller": {
    fontFamily: 'ui-monospace, "SFMono-Regular", Menlo, Consolas, "Noto Sans Mono CJK SC", monospace',
    lineHeight: "1.45", overflow: "auto", maxHeight: "70vh",
  },
  ".cm-content": { padding: "0.4rem 0", minHeight: "12rem" },
  ".cm-line": { padding: "0 0.5rem" },
  ".cm-gutters": { userSelect: "none" },
});

/**
 * A CodeMirror editor in `parent`. Options: doc (initial text), label (accessible name),
 * onChange(text), onRun(), onCheck(). Returns {view, getCode(), setCode(text), focus()}.
 */
export function createEditor(parent, { doc, label, onChange, onRun, onCheck }) {
  const shortcuts = [
    { key: "Mod-Enter", run: () => { onRun(); return true; } },
    { key: "Shift-Mod-Enter", run: () => { onCheck(); return true; } },
    { key: "Shift-Mod-z", run: redo, preventDefault: true }, // as on macOS, also on Linux and Windows
  ];
  const view = new EditorView({
    parent,
    state: EditorState.create({
      doc,
      extensions: [
        lineNumbers(), highlightActiveLineGutter(), highlightSpecialChars(), history(), drawSelection(),
        indentOnInput(), bracketMatching(), closeBrackets(), highlightActiveLine(),
        syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
        python(), indentUnit.of("    "), EditorState.tabSize.of(4), EditorView.lineWrapping,
        keymap.of([...shortcuts, ...closeBracketsKeymap, ...defaultKeymap, ...historyKeymap, indentWithTab]),
        // tabindex: the code is a tab stop axe-core sees (rule scrollable-region-focusable: the
        // scroller around it scrolls, and a contenteditable alone does not count as focusable there)
        EditorView.contentAttributes.of({
          "aria-label": label, autocapitalize: "off", autocorrect: "off", spellcheck: "false", tabindex: "0",
        }),
        EditorView.updateListener.of((update) => {
          if (update.docChanged) onChange(update.state.doc.toString());
        }),
        layout,
      ],
    }),
  });
  return {
    view,
    getCode: () => view.state.doc.toString(),
    setCode: (text) => view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } }),
    focus: () => view.focus(),
  };
}
