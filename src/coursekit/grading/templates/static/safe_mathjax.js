// MathJax 3 set-up for every page that typesets student TeX: formgrader's submission page (loaded as
// /static/safe_mathjax.js, templates/formgrade/mathjax.html.j2) and the feedback pages (inlined,
// templates/feedback/mathjax.html.j2). Student TeX is also cleaned before it is stored
// (coursekit.grading.preprocessors.clean_tex); this is the second guard.
// - ui/safe, MathJax's own `safe` extension (MathJax-src ts/ui/safe/safe.ts): URLs http/https only,
//   classes and ids only mjx-*, styles from its short list;
// - its URL filter (ts/ui/safe/SafeMethods.ts, filterURL) reads the scheme with /^\s*([a-z]+):/i and
//   passes any URL without one, so "java\tscript:" (a browser drops the tab) got through: replaced
//   below by one that drops what a browser's URL parser drops first and then wants http(s)://;
// - \href \class \style \cssId \data (the html extension), \unicode and \toggle \mathtip \texttip are
//   not autoloaded, so they stay undefined, and \require loads nothing.
window.MathJax = {
  loader: { load: ["ui/safe"] },
  tex: {
    inlineMath: [["$", "$"], ["\\(", "\\)"]],
    displayMath: [["$$", "$$"], ["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
    autoload: { html: [], unicode: [], action: [] },
    require: { defaultAllow: false }
  },
  options: {
    safeOptions: {
      allow: { URLs: "safe", classes: "safe", cssIDs: "safe", styles: "safe" },
      safeProtocols: { http: true, https: true, file: false, javascript: false, data: false }
    }
  },
  startup: {
    ready: function () {
      MathJax.startup.defaultReady();
      MathJax.startup.document.safe.filterMethods.filterURL = function (safe, url) {
        var bare = String(url).replace(/[\u0000-\u0020\u007f-\u009f]/g, "");
        return /^https?:\/\//i.test(bare) ? bare : null;
      };
    }
  }
};
