"""nbgrader course for lesson 11 (GRPO). Read by nbgrader (run from this folder) and by `coursekit`.

Pipelines are ordered lists; the notes beside them are nbgrader's ordering constraints.
See autograder/README.md for the commands and the grading rules.
"""

import os

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearHiddenTests,
    ClearMarkScheme,
    ClearOutput,
    ComputeChecksums,
    GetGrades,
    IgnorePattern,
    IncludeHeaderFooter,
    InstantiateTests,
    LockCells,
    SaveAutoGrades,
    SaveCells,
)

from coursekit.grading.formgrader import TEMPLATE_DIRS
from coursekit.grading.preprocessors import (
    BlankSolutions,
    CapOutput,
    ChineseAutoComments,
    HideHiddenTests,
    SanitizeStudentContent,
)
from coursekit.grading.sandbox.executor import SandboxExecute

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = "lesson11"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(c.CourseDirectory.root, "gradebook.db")

# ---- generate_assignment: source -> release (nbgrader's list with ClearSolutions -> BlankSolutions)
c.GenerateAssignment.preprocessors = [
    IncludeHeaderFooter,
    InstantiateTests,
    LockCells,
    BlankSolutions,       # `# SOLUTION` lines -> `var = ______` / `return ______`, as in exercises/
    ClearOutput,
    CheckCellMetadata,
    ComputeChecksums,
    SaveCells,            # the gradebook keeps the test cells WITH their hidden tests ...
    ClearHiddenTests,     # ... so this must come after ComputeChecksums and SaveCells
    ClearMarkScheme,
    ComputeChecksums,     # again, after ClearHiddenTests
    CheckCellMetadata,
]
c.ClearSolutions.text_stub = ""  # answer cells keep their prompt line (e.g. **你的答案：**) and nothing else

# ---- autograde: submitted -> autograded (nbgrader's list with Execute -> SandboxExecute, + CapOutput)
c.Autograde.autograde_preprocessors = [
    SandboxExecute,       # `coursekit grade` runs the steps before SaveAutoGrades in its workers, the rest in
    IgnorePattern,        # its recorder (coursekit.grading.course.worker_steps)
    ClearMetadataPreprocessor,
    CapOutput,            # before SaveAutoGrades, so the saved notebook is already small
    SanitizeStudentContent,  # no student script reaches formgrader or feedback
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]
c.SandboxExecute.timeout = 10              # seconds per cell
c.SandboxExecute.notebook_timeout = 60     # seconds per notebook
c.SandboxExecute.memory_limit = 2 << 30    # 2 GiB address space per grading kernel
c.SandboxExecute.file_size_limit = 256 << 20  # largest file a kernel may write
c.SandboxExecute.process_limit = 64        # processes + threads per sandbox
c.SandboxExecute.scratch_size = 256 << 20  # the kernel's writable home folder (tmpfs)
c.SandboxExecute.show_hidden_inputs = False  # diagnostics describe hidden inputs by kind, never quote them
c.CapOutput.max_lines = 1000
c.CapOutput.max_chars = 20000

# ---- generate_feedback: autograded -> feedback HTML without hidden test source
c.GenerateFeedback.preprocessors = [GetGrades, ChineseAutoComments, HideHiddenTests, SanitizeStudentContent,
                                   CSSHTMLHeaderPreprocessor]

# ---- formgrader (coursekit formgrader): works offline
# nbgrader's submission page loads MathJax from cdnjs; this template folder, searched first, swaps in
# MathJax 3 from node_modules. nbgrader's own template folder must stay in the list (feedback, formgrade).
c.HTMLExporter.extra_template_basedirs = TEMPLATE_DIRS
# formgrader's submission page shows the student's flags and vetoes (templates/formgrade/formgrade_macros.html.j2)
c.HTMLExporter.filters = {"coursekit_flags": "coursekit.grading.formgrader_extension.page_flags",
                          # feedback pages inline the vendored MathJax (templates/feedback/mathjax.html.j2)
                          "coursekit_inline_mathjax": "coursekit.grading.pages.inline_mathjax"}
# The exchange inside the course (created by coursekit formgrader): no "exchange missing" banner.
c.Exchange.root = os.path.join(c.CourseDirectory.root, "exchange")
