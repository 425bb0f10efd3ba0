// No-Quarto preview behaviour: Mermaid diagrams and the site search box. Served by the site itself.
(function () {
  "use strict";
  var root = document.body.getAttribute("data-site-root") || "";

  function renderMermaid() {
    var nodes = document.querySelectorAll(".jp-Mermaid > pre.mermaid");
    if (!nodes.length || !window.mermaid) return;
    window.mermaid.initialize({ startOnLoad: false, theme: "neutral", securityLevel: "strict" });
    window.mermaid.run({ nodes: nodes });
  }

  var index = null;
  function loadIndex() {
    if (!index) {
      index = fetch(root + "search.json").then(function (r) {
        if (!r.ok) throw new Error("search.json: HTTP " + r.status);
        return r.json();
      });
    }
    return index;
  }

  function showResults(list, entries, query) {
    list.textContent = "";
    entries.slice(0, 20).forEach(function (e) {
      var li = document.createElement("li");
      var a = document.createElement("a");
      a.href = root + e.href;
      a.textContent = e.section;
      var small = document.createElement("small");
      var at = e.text.toLowerCase().indexOf(query);
      small.textContent = at < 0 ? e.title : e.text.slice(Math.max(0, at - 20), at + 60);
      li.appendChild(a);
      li.appendChild(small);
      list.appendChild(li);
    });
    if (!entries.length) {
      var none = document.createElement("li");
      none.textContent = "没有结果";
      list.appendChild(none);
    }
    list.hidden = false;
  }

  function setUpSearch() {
    var input = document.getElementById("course-search-input");
    var list = document.getElementById("course-search-results");
    if (!input || !list) return;
    input.addEventListener("input", function () {
      var query = input.value.trim().toLowerCase();
      if (!query) { list.hidden = true; return; }
      loadIndex().then(function (all) {
        showResults(list, all.filter(function (e) {
          return (e.section + " " + e.text).toLowerCase().indexOf(query) >= 0;
        }), query);
      });
    });
  }

  renderMermaid();
  setUpSearch();
})();
