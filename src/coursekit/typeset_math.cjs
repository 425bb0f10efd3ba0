// The preview's formulas typeset at build time: MathJax 3 (the npm pin in node_modules/mathjax) in node,
// run once by coursekit.preview.typeset_math for every page of a site, so the pages load no MathJax.
//
//   node typeset_math.cjs <node_modules/mathjax/es5>  < {"pages": [html, ...]}  > {"pages": [...], "css": "...", "errors": [...]}
//
// Each page's html (the inside of its <main>) is searched for TeX as MathJax in the browser searched it
// (the same delimiters, escapes, environments and ignored tags and classes) and each formula replaced by
// its CHTML (with MathJax's assistive MathML for screen readers). "css" is one stylesheet for every page:
// MathJax's styles for the characters the pages use, its fonts' URLs relative to the stylesheet's folder
// (the site's copy of node_modules/mathjax/es5). "errors": [{page, tex, message}] for each formula that
// is no valid TeX (an unknown macro too: noundefined is left out, so a typo fails the build, not the page).
"use strict";

const path = require("path");

const TEX = {
  inlineMath: [["$", "$"], ["\\(", "\\)"]],
  displayMath: [["$$", "$$"], ["\\[", "\\]"]],
  processEscapes: true,
  processEnvironments: true,
  packages: { "[-]": ["noundefined"] },
};
const FONTS = "output/chtml/fonts/woff-v2"; // relative to the stylesheet, which the site keeps beside MathJax's copy

function readStdin() {
  return new Promise((resolve, reject) => {
    const chunks = [];
    process.stdin.on("data", (chunk) => chunks.push(chunk));
    process.stdin.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    process.stdin.on("error", reject);
  });
}

async function main() {
  const [es5] = process.argv.slice(2);
  if (!es5) throw new Error("usage: node typeset_math.cjs <node_modules/mathjax/es5> < pages.json");
  const { pages } = JSON.parse(await readStdin());
  const errors = [];
  let current = 0; // the page being typeset, for the errors
  const MathJax = await require(path.resolve(es5, "node-main.js")).init({
    loader: { load: ["input/tex", "output/chtml", "a11y/assistive-mml"] },
    tex: {
      ...TEX,
      formatError(jax, error) {
        errors.push({ page: current, tex: jax.latex, message: error.message });
        return jax.formatError(error);
      },
    },
    chtml: { fontURL: FONTS, matchFontHeight: false }, // the stylesheet matches it (below)
    options: { ignoreHtmlClass: "tex2jax_ignore", processHtmlClass: "tex2jax_process" },
    startup: { typeset: false },
  });
  const adaptor = MathJax.startup.adaptor;
  const retries = MathJax._.mathjax.mathjax.handleRetriesFor; // TeX extensions the autoloader fetches
  const out = [];
  let last = null;
  for (current = 0; current < pages.length; current++) {
    const doc = MathJax.startup.getDocument(`<!DOCTYPE html><html><head></head><body>${pages[current]}</body></html>`);
    await retries(() => doc.render());
    out.push(adaptor.innerHTML(adaptor.body(doc.document)));
    last = doc;
  }
  // the output jax collects the characters every page used; its stylesheet, updated once more, holds them all
  const output = MathJax.startup.output;
  const css = last ? adaptor.textContent(output.styleSheet(last)) : "";
  // MathJax in the page scaled each formula so that its x-height is the surrounding text's (matchFontHeight,
  // measured in the reader's font); CSS does the same: an ex in font-size is the parent font's
  const match = `mjx-container[jax="CHTML"] {\n  font-size: calc(1ex / ${output.font.params.x_height});\n}\n`;
  process.stdout.write(JSON.stringify({ pages: out, css: css + match, errors }));
}

main().catch((error) => {
  process.stderr.write(`typeset_math.cjs: ${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
