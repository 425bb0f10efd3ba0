// The preview's formulas typeset at build time: MathJax 3 (the npm pin in node_modules/mathjax) in node,
// run once by coursekit.preview.typeset_math for every page of a site, so the pages load no MathJax.
//
//   node typeset_math.cjs <node_modules/mathjax/es5>  < {"pages": [html, ...], "drawnLater": [false, true, ...]}
//                                                      > {"pages": [...], "css": "...", "errors": [...]}
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
// A page whose formulas are drawn later (a page with the runner: coursekit.preview) has a blank box of each
// SVG's size in its place (<mjx-blank data-formula="k">; the assistive MathML stays), the SVG being the k-th
// string of a JSON array in <script type="application/json" id="course-formula-svg"> at the end of the page,
// which assets/site/site.js draws: the formulas near the screen at once, the others once the runner's Python has
// started. Drawing every formula at first paint took about 0.08 CPU-s of the page's main thread before the first
// Check, CPU that Pyodide's start competes for on 2 cores (issue 33).
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

// A typeset formula's SVG out of the page, into `store`: a blank box of its size (and vertical shift) in its place.
function storeSvg(adaptor, container, store) {
  if (adaptor.kind(container) !== "mjx-container") return;
  const svg = adaptor.firstChild(container);
  const size = ["width", "height"].map((name) => `${name}: ${adaptor.getAttribute(svg, name)}`);
  const shift = adaptor.getStyle(svg, "vertical-align");
  const blank = adaptor.node("mjx-blank", {
    "data-formula": String(store.length),
    "aria-hidden": "true",
    style: ["display: inline-block", ...size, ...(shift ? [`vertical-align: ${shift}`] : [])].join("; "),
  });
  store.push(adaptor.outerHTML(svg));
  adaptor.replace(blank, svg);
}

// The store as a <script> element's text: JSON with every "<" escaped, so no "</script>" or "<!--" ends it early.
function storeScript(store) {
  const json = JSON.stringify(store).replace(/</g, "\\u003c");
  return `<script type="application/json" id="course-formula-svg">${json}</script>`;
}

async function main() {
  const [es5] = process.argv.slice(2);
  if (!es5) throw new Error("usage: node typeset_math.cjs <node_modules/mathjax/es5> < pages.json");
  const { pages, drawnLater = [] } = JSON.parse(await readStdin());
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
    const store = [];
    for (const item of doc.math) {
      baselineOnTheBox(adaptor, item.typesetRoot);
      if (drawnLater[current]) storeSvg(adaptor, item.typesetRoot, store);
    }
    out.push(adaptor.innerHTML(adaptor.body(doc.document)) + (store.length ? storeScript(store) : ""));
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
