// formgrader's submission page script (templates/formgrade/formgrade_macros.html.j2): nbgrader's inline
// scripts, moved here so that the page runs under a Content-Security-Policy without inline script
// (coursekit.grading.formgrader_extension).
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

  $(document).ready(function () {
    $("[data-link]").each(function () {
      $(this).map(linkTo("notebook", $(this).data("link"))).removeAttr("data-link");
    });
    $("span.glyphicon.name-hidden").tooltip({title: "显示学生姓名", placement: "bottom", trigger: "hover"})
      .on("click", function () { window.toggle_name(true); });
    $("span.glyphicon.name-shown").tooltip({title: "隐藏学生姓名", placement: "bottom", trigger: "hover"})
      .on("click", function () { window.toggle_name(false); });
  });
})();
