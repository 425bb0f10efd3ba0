// The preview's formulas typeset at build time: MathJax 3 (the npm pin in node_modules/mathjax) in node,
// run once by coursekit.preview.typeset_math for every page of a site, so the pages load no MathJax.
//
//   node typeset_math.cjs <node_modules/mathjax/es5>  < {"pages": [html, ...]}  > {"pages": [...], "css": "...", "errors": [...]}
//
// Each page's html (the inside of its <main>) is searched for TeX as MathJax in the browser searched it
// (the same delimiters, escapes, environments and ignored tags and classes) and each formula replaced by
// its SVG (with MathJax's assistive MathML for screen readers); the glyphs a page uses are defined once, at
// the end of its html (MathJax's global font cache), so a page needs no font. SVG, not CHTML: the typeset
// page's first Check cost the main thread 486 ms against 583 ms with CHTML (bench/trace_runner_start.py
// --to-check, issue 33), CHTML's thousands of elements being styled, laid out and painted at load.
// "css" is MathJax's stylesheet for SVG output, the same for every page. "errors": [{page, tex, message}] for
// each formula that is no valid TeX (an unknown macro too: noundefined is left out, so a typo fails the build,
// not the page).
"use strict";

const path = require("path");

const TEX = {
  inlineMath: [["$", "$"], ["\\(", "\\)"]],
  displayMath: [["$$", "$$"], ["\\[", "\\]"]],
  processEscapes: true,
  processEnvironments: true,
  packages: { "[-]": ["noundefined"] },
};

function readStdin() {
  return new Promise((resolve, reject) => {
    const chunks = [];
    process.stdin.on("data", (chunk) => chunks.push(chunk));
    process.stdin.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    process.stdin.on("error", reject);
  });
}

// An inline formula's box scrolls on a phone (site.css: an inline-flex box, whose baseline is its <svg>'s
// bottom edge): the <svg>'s shift below the baseline (its depth, MathJax's vertical-align) moves to the box,
// where it still applies, so the formula sits on the line as MathJax places it. Sizes are in ex: each formula
// is scaled to the x-height of the reader's font, as MathJax in the page scaled it.
function baselineOnTheBox(adaptor, container) {
  // (an escaped dollar, `\$`, is an item too: its text)
  if (adaptor.kind(container) !== "mjx-container" || adaptor.getAttribute(container, "display") === "true") return;
  const svg = adaptor.firstChild(container);
  const shift = adaptor.getStyle(svg, "vertical-align");
  if (!shift) return;
  adaptor.setStyle(container, "vertical-align", shift);
  adaptor.setStyle(svg, "vertical-align", "");
  if (!adaptor.getAttribute(svg, "style")) adaptor.removeAttribute(svg, "style");
}

async function main() {
  const [es5] = process.argv.slice(2);
  if (!es5) throw new Error("usage: node typeset_math.cjs <node_modules/mathjax/es5> < pages.json");
  const { pages } = JSON.parse(await readStdin());
  const errors = [];
  let current = 0; // the page being typeset, for the errors
  const MathJax = await require(path.resolve(es5, "node-main.js")).init({
    loader: { load: ["input/tex", "output/svg", "a11y/assistive-mml"] },
    tex: {
      ...TEX,
      formatError(jax, error) {
        errors.push({ page: current, tex: jax.latex, message: error.message });
        return jax.formatError(error);
      },
    },
    svg: { fontCache: "global" },
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
    for (const item of doc.math) baselineOnTheBox(adaptor, item.typesetRoot);
    out.push(adaptor.innerHTML(adaptor.body(doc.document)));
    last = doc;
  }
  // the output jax collects the characters every page used; its stylesheet, updated once more, holds them all
  const css = last ? adaptor.textContent(MathJax.startup.output.styleSheet(last)) : "";
  process.stdout.write(JSON.stringify({ pages: out, css, errors }));
}

main().catch((error) => {
  process.stderr.write(`typeset_math.cjs: ${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
