// formgrader's submission page script (templates/formgrade/formgrade_macros.html.j2): nbgrader's inline
// scripts, moved here so that the page runs under a Content-Security-Policy without inline script, and
// the student's flags and vetoes above the notebook (from /coursekit/flags/<lesson>/<student>,
// coursekit.grading.formgrader_extension), so that whoever grades by hand sees them.
(function () {
  var data = document.currentScript.dataset;
  // nbgrader's page globals (formgrade.js, formgrade_models.js read them)
  window.submission_id = data.submissionId;
  window.notebook_id = data.notebookId;
  window.assignment_id = data.assignmentId;
  window.base_url = data.baseUrl + "/formgrader";

  window.toggle_name = function (on) {
    $(".name-shown").tooltip("hide");
    $(".name-hidden").tooltip("hide");
    if (on) {
      $(".name-shown").show();
      $(".name-hidden").hide();
    } else {
      $(".name-hidden").show();
      $(".name-shown").hide();
    }
  };

  function showFlags(flags) {
    if (!flags.length) return;
    var box = document.createElement("div");
    box.id = "coursekit-flags";
    box.setAttribute("role", "alert");
    var vetoed = flags.some(function (f) { return f.veto; });
    box.className = "alert " + (vetoed ? "alert-danger" : "alert-warning");
    var title = document.createElement("strong");
    title.textContent = vetoed ? "一票否决 (veto) and flags: " : "Flags: ";
    box.appendChild(title);
    flags.forEach(function (f) {
      var item = document.createElement("span");
      item.className = "coursekit-flag label " + (f.veto ? "label-danger" : "label-warning");
      item.style.marginRight = "0.5em";
      item.style.whiteSpace = "normal";
      item.textContent = f.flag;
      box.appendChild(item);
    });
    var container = document.querySelector("body > .container");
    container.insertBefore(box, container.firstChild);
  }

  $(document).ready(function () {
    $("[data-link]").each(function () {
      $(this).map(linkTo("notebook", $(this).data("link"))).removeAttr("data-link");
    });
    $("span.glyphicon.name-hidden").tooltip({title: "Show student name", placement: "bottom", trigger: "hover"})
      .on("click", function () { window.toggle_name(true); });
    $("span.glyphicon.name-shown").tooltip({title: "Hide student name", placement: "bottom", trigger: "hover"})
      .on("click", function () { window.toggle_name(false); });
    $.getJSON(data.baseUrl + "/coursekit/flags/" + encodeURIComponent(data.assignmentId) + "/" + encodeURIComponent(data.student)).done(showFlags);
  });
})();
