"""axe-core on the runner's fixture pages in the shape of a Quarto page and of a Bootstrap-styled page
(issue 25): 0 serious and 0 critical violations, with the runner built (its CodeMirror editor, line
numbers included) and after a failed Check (results, messages). The preview's pages: tests/site/
test_site_student_page.py.
"""

from __future__ import annotations

import pytest
from test_runner_browser import SAMPLE_VARIANCE, Widget

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("name", ["quarto", "bootstrap", "preview"])
def test_axe_finds_nothing_serious_on_the_runner_pages(name, tab, pages, axe_violations) -> None:
    widget = Widget(tab, pages[name])
    widget.wait_ready()
    widget.wait_editor()
    assert axe_violations(widget.page) == [], f"{name}: with the editor"
    widget.type_code(SAMPLE_VARIANCE)
    widget.check()
    assert axe_violations(widget.page) == [], f"{name}: after a failed Check"
