// After MathJax 3 (formgrade/mathjax.html.j2): formgrade.js speaks MathJax 2
// (MathJax.Hub.Startup.signal, MathJax.Hub.Queue); give it that much.
MathJax.Hub = {
  Startup: { signal: { Interest: function (callback) {
    MathJax.startup.promise.then(function () { callback("End"); });
  } } },
  Queue: function () { return MathJax.typesetPromise(); }
};
