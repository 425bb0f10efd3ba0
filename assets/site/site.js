// No-Quarto preview behaviour: Mermaid diagrams, the formulas drawn after the page's start, the sticky bar's
// height, scrolling boxes as tab stops, and the site search box.
// Served by the site itself.
//
// Search (search.json from coursekit.preview.write_search_index: {sections, words}): the query and
// each section are matched as plain text, case- and punctuation-insensitively; Latin letters and
// digits form words ("dr grpo" finds "Dr. GRPO"), Chinese runs are cut into the site's own
// two-character words (a run "组内优势" becomes 组内 + 优势) and each word must occur in the section.
// Arrow keys move through the results, Enter opens one, Escape closes the list.
(function () {
  "use strict";
  var root = document.body.getAttribute("data-site-root") || "";
  var MAX_RESULTS = 20;

  // Mermaid's bundle (5.5 MB of script) is loaded and run only for a page with a diagram. On the
  // exercise page (the one with the runner) only when the diagram comes within 200 px of the
  // viewport: parsing it and drawing take seconds of main-thread CPU, which would compete with
  // Pyodide's start-up (and later delay a click) on a small machine. Other pages draw it at once.
  function renderMermaid() {
    var nodes = document.querySelectorAll(".jp-Mermaid > pre.mermaid");
    if (!nodes.length) return;
    function draw() {
      var script = document.createElement("script");
      script.src = root + "assets/vendor/mermaid/mermaid.min.js";
      script.onload = function () {
        window.mermaid.initialize({ startOnLoad: false, theme: "neutral", securityLevel: "strict" });
        window.mermaid.run({ nodes: nodes });
      };
      document.head.appendChild(script);
    }
    if (!document.querySelector("script[src$='assets/runner/runner.js']") || !window.IntersectionObserver) {
      draw();
      return;
    }
    var seen = new IntersectionObserver(function (entries) {
      if (!entries.some(function (e) { return e.isIntersecting; })) return;
      seen.disconnect();
      draw();
    }, { rootMargin: "200px 0px" });
    nodes.forEach(function (node) { seen.observe(node); });
  }

  // On a page with the runner each formula comes as a blank box of its size (<mjx-blank data-formula="k">, its
  // assistive MathML beside it for screen readers), its SVG the k-th string of the JSON in #course-formula-svg
  // (coursekit/typeset_math.cjs). Drawn here: those within half a screen of the viewport at once, and as they come
  // near; the others once the runner's Python has started, a batch per idle slice of the main thread; all before
  // printing. Drawing the lesson page's 118 at first paint took about 0.08 CPU-s of its main thread's 0.42 before
  // the first Check, CPU that Pyodide's start competes for on 2 cores (issue 33). window.courseMathTypeset resolves
  // when every formula is drawn (as on the Quarto pages: assets/site/quarto-head.html).
  function drawFormulas() {
    var store = document.getElementById("course-formula-svg");
    var blanks = Array.prototype.slice.call(document.querySelectorAll("mjx-blank[data-formula]"));
    var done;
    window.courseMathTypeset = new Promise(function (resolve) { done = resolve; });
    if (!store || !blanks.length) {
      done();
      return;
    }
    var svgs = null;
    var seen = window.IntersectionObserver && new IntersectionObserver(function (entries) {
      var near = entries.filter(function (e) { return e.isIntersecting; }).map(function (e) { return e.target; });
      near.forEach(function (blank) { seen.unobserve(blank); });
      if (near.length) draw(near);
    }, { rootMargin: "50% 0px" });
    function draw(batch) {
      svgs = svgs || JSON.parse(store.textContent);
      batch.forEach(function (blank) {
        if (!blank.isConnected) return;
        var template = document.createElement("template");
        template.innerHTML = svgs[Number(blank.dataset.formula)];
        blank.replaceWith(template.content);
      });
      blanks = blanks.filter(function (blank) { return blank.isConnected; });
      if (!blanks.length) {
        if (seen) seen.disconnect();
        done();
      }
    }
    if (seen) blanks.forEach(function (blank) { seen.observe(blank); });
    window.addEventListener("beforeprint", function () { draw(blanks); });
    var idle = window.requestIdleCallback || function (run) {
      return setTimeout(function () { run({ timeRemaining: function () { return 10; } }); }, 50);
    };
    function next() {  // the next batch once Python has started and nothing is pending, in an idle slice
      if (blanks.length) afterPythonStarts(function () { idle(slice, { timeout: 1000 }); });
    }
    function slice(deadline) {
      var batch = blanks.slice(0, 1);
      while (batch.length < blanks.length && batch.length < 20 && deadline.timeRemaining() > 5) {
        batch.push(blanks[batch.length]);
      }
      draw(batch);
      next();
    }
    next();
  }

  // Anchors and the runner's toolbar stay clear of the sticky bar: --course-sticky-top is its height
  // while it is sticky (wide screens), else 0 (phones, where it scrolls away with the page).
  function trackStickyBar() {
    var bar = document.querySelector(".course-nav");
    if (!bar) return;
    function update() {
      var sticky = getComputedStyle(bar).position === "sticky";
      document.documentElement.style.setProperty("--course-sticky-top", (sticky ? bar.offsetHeight : 0) + "px");
    }
    update();
    if (window.ResizeObserver) new ResizeObserver(update).observe(bar);
    window.addEventListener("resize", update);
  }

  // A box in the page that scrolls (a wide diagram, formula, code or table on a phone) is a tab stop while it scrolls,
  // so the keyboard can reach and scroll it (axe-core rule scrollable-region-focusable). Checked at
  // load (on the exercise page once the runner's Python has started: afterPythonStarts), on resize, and
  // when the page's content changes (formulas typeset, a diagram drawn).
  // A typeset formula's parts never scroll, only its box (mjx-container, site.css): they are not read, which spares
  // the style of some 5,000 elements on the lesson page, whose formulas are all typeset at load (issue 33).
  function markScrollBoxes() {
    document.querySelectorAll("main *:not(mjx-container *)").forEach(function (box) {
      if (box.closest(".cr-widget")) return; // the runner's code editor is a tab stop of its own
      var style = getComputedStyle(box);
      var scrolls = (/auto|scroll/.test(style.overflowX) && box.scrollWidth > box.clientWidth + 1)
        || (/auto|scroll/.test(style.overflowY) && box.scrollHeight > box.clientHeight + 1);
      var was = box.dataset.courseScrollStop; // the tabindex it had before ("" for none)
      if (scrolls && was === undefined && box.tabIndex < 0) {
        box.dataset.courseScrollStop = box.getAttribute("tabindex") || "";
        box.setAttribute("tabindex", "0");
      } else if (!scrolls && was !== undefined) {
        if (was) box.setAttribute("tabindex", was);
        else box.removeAttribute("tabindex");
        delete box.dataset.courseScrollStop;
      }
    });
  }

  // On the exercise page, once the runner's Python has started (<html data-course-runner-starting="true"> until
  // then, set by runner.js, then the event "course-runner-started") and has answered a Run or Check clicked
  // meanwhile (<html data-course-runner-busy="true">, then "course-runner-idle"): reading every box's style and
  // size forces the page's style and layout again after each change (the runner's widget, formulas typeset),
  // CPU that Pyodide's start, and then the first Check, compete for on a 2-core machine (issue 33). Other
  // pages at once.
  function afterPythonStarts(run) {
    var html = document.documentElement;
    function whenIdle() {
      if (html.dataset.courseRunnerBusy === "true") {
        document.addEventListener("course-runner-idle", whenIdle, { once: true });
      } else {
        run();
      }
    }
    if (html.dataset.courseRunnerStarting === "true") {
      document.addEventListener("course-runner-started", whenIdle, { once: true });
    } else {
      whenIdle();
    }
  }

  function trackScrollBoxes() {
    var pending = 0;
    function later() {
      clearTimeout(pending);
      pending = setTimeout(markScrollBoxes, 200);
    }
    markScrollBoxes();
    window.addEventListener("resize", later);
    // formulas typeset as they come near (assets/site/quarto-head.html) and diagrams drawn change what scrolls
    var main = document.querySelector("main");
    if (main && window.MutationObserver) new MutationObserver(later).observe(main, { childList: true, subtree: true });
  }

  // ---- search

  function normalize(text) {
    return text.normalize("NFKC").toLowerCase();
  }

  var CJK = /[\u3400-\u9fff\uf900-\ufaff]+/g;
  var LATIN = /[a-z0-9]+/g;

  // The query as the words every matching section must contain.
  function queryWords(query, vocabulary) {
    var text = normalize(query);
    var words = text.match(LATIN) || [];
    (text.match(CJK) || []).forEach(function (run) {
      for (var k = 0; k < run.length;) {
        if (k + 1 < run.length && vocabulary.has(run.slice(k, k + 2))) {
          words.push(run.slice(k, k + 2));
          k += 2;
        } else {
          words.push(run[k]);
          k += 1;
        }
      }
    });
    return words;
  }

  function prepare(index) {
    return {
      vocabulary: new Set(index.words),
      sections: index.sections.map(function (e) {
        var heading = normalize(e.section);
        var body = normalize(e.text);
        return { entry: e, heading: heading, body: body,
                 latin: new Set((heading + " " + body).match(LATIN) || []) };
      }),
    };
  }

  function contains(section, word) {
    if (/^[a-z0-9]+$/.test(word)) {
      if (section.latin.has(word)) return true;
      // the last word may still be typed: a prefix of a section's word counts
      return Array.from(section.latin).some(function (w) { return w.indexOf(word) === 0; });
    }
    return section.heading.indexOf(word) >= 0 || section.body.indexOf(word) >= 0;
  }

  function search(prepared, query) {
    var words = queryWords(query, prepared.vocabulary);
    if (!words.length) return { words: words, hits: [] };
    var hits = prepared.sections.filter(function (s) {
      return words.every(function (w) { return contains(s, w); });
    }).map(function (s) {
      var score = words.reduce(function (n, w) { return n + (s.heading.indexOf(w) >= 0 ? 10 : 1); }, 0);
      return { section: s, score: score };
    });
    hits.sort(function (a, b) { return b.score - a.score; });
    return { words: words, hits: hits.slice(0, MAX_RESULTS) };
  }

  // `text` normalised one character at a time, with the index in `text` each normalised character
  // came from: a word found in the normalised text marks the same characters of `text`, even where
  // normalising changes a length ("…" becomes "...").
  function normalizedWithOrigin(text) {
    var out = "";
    var from = [];
    for (var i = 0; i < text.length;) {
      var ch = String.fromCodePoint(text.codePointAt(i));
      var n = normalize(ch);
      for (var k = 0; k < n.length; k++) from.push(i);
      out += n;
      i += ch.length;
    }
    from.push(text.length);
    return { text: out, from: from };
  }

  // A short piece of the section's text around the first word found, with every word marked.
  function snippet(section, words) {
    var text = section.entry.text;
    var lower = normalize(text);
    var at = words.reduce(function (best, w) {
      var i = lower.indexOf(w);
      return i >= 0 && (best < 0 || i < best) ? i : best;
    }, -1);
    var start = Math.max(0, at - 24);
    var piece = text.slice(start, start + 90);
    var small = document.createElement("small");
    var found = normalizedWithOrigin(piece);
    var marks = [];
    words.forEach(function (w) {
      for (var i = found.text.indexOf(w); i >= 0; i = found.text.indexOf(w, i + w.length)) {
        marks.push([found.from[i], Math.max(found.from[i + w.length], found.from[i] + 1)]);
      }
    });
    marks.sort(function (a, b) { return a[0] - b[0]; });
    var pos = 0;
    if (start > 0) small.appendChild(document.createTextNode("…"));
    marks.forEach(function (m) {
      if (m[0] < pos) return;
      small.appendChild(document.createTextNode(piece.slice(pos, m[0])));
      var mark = document.createElement("mark");
      mark.textContent = piece.slice(m[0], m[1]);
      small.appendChild(mark);
      pos = m[1];
    });
    small.appendChild(document.createTextNode(piece.slice(pos) + (start + 90 < text.length ? "…" : "")));
    return small;
  }

  var index = null;
  function loadIndex() {
    if (!index) {
      index = fetch(root + "search.json").then(function (r) {
        if (!r.ok) throw new Error("search.json: HTTP " + r.status);
        return r.json();
      }).then(prepare);
    }
    return index;
  }

  function setUpSearch() {
    var input = document.getElementById("course-search-input");
    var list = document.getElementById("course-search-results");
    if (!input || !list) return;
    var active = -1;

    function options() {
      return list.querySelectorAll("[role=option]");
    }

    function setActive(k) {
      var all = options();
      if (!all.length) return;
      active = (k + all.length) % all.length;
      all.forEach(function (o, i) { o.setAttribute("aria-selected", String(i === active)); });
      input.setAttribute("aria-activedescendant", all[active].id);
      all[active].scrollIntoView({ block: "nearest" });
    }

    function close() {
      list.hidden = true;
      active = -1;
      input.setAttribute("aria-expanded", "false");
      input.removeAttribute("aria-activedescendant");
    }

    function show(result) {
      list.textContent = "";
      active = -1;
      result.hits.forEach(function (hit, k) {
        var e = hit.section.entry;
        var li = document.createElement("li");
        li.id = "course-search-option-" + k;
        li.setAttribute("role", "option");
        li.setAttribute("aria-selected", "false");
        var a = document.createElement("a");
        a.href = root + e.href;
        a.tabIndex = -1;
        a.textContent = e.section;
        li.appendChild(a);
        li.appendChild(snippet(hit.section, result.words));
        list.appendChild(li);
      });
      if (!result.hits.length) {
        var none = document.createElement("li");
        none.className = "course-search-none";
        none.textContent = "没有结果";
        list.appendChild(none);
      }
      list.hidden = false;
      input.setAttribute("aria-expanded", "true");
    }

    input.addEventListener("input", function () {
      var query = input.value.trim();
      if (!query) { close(); return; }
      loadIndex().then(function (prepared) {
        if (input.value.trim() === query) show(search(prepared, query));
      });
    });
    input.addEventListener("keydown", function (event) {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        if (list.hidden) return;
        event.preventDefault();
        setActive(active + (event.key === "ArrowDown" ? 1 : -1));
      } else if (event.key === "Enter") {
        var all = options();
        if (list.hidden || !all.length) return;
        event.preventDefault();
        location.href = all[Math.max(active, 0)].querySelector("a").href;
      } else if (event.key === "Escape") {
        close();
      }
    });
  }

  renderMermaid();
  drawFormulas();
  trackStickyBar();
  afterPythonStarts(trackScrollBoxes);
  setUpSearch();
})();
