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

  // nbgrader's comment box (formgrade_models.js, CommentUI) sets its English placeholder with jQuery's .attr()
  // where no automatic comment is shown: that one text is put in Chinese, any other is kept
  var ENGLISH_PLACEHOLDER = "Type any comments here (supports Markdown and MathJax)";
  $.attrHooks.placeholder = {
    set: function (elem, value) {
      elem.setAttribute("placeholder", value === ENGLISH_PLACEHOLDER ? "在这里写评语（支持 Markdown 和 MathJax 公式）" : value);
      return true;
    },
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
