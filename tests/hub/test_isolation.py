"""What a student can reach, tried as a student: code run in alice's own kernel (through the hub and her
server's API) and requests made with her own token.

The directory exchange's rule (nbgrader/exchange/default/collect.py: submissions are named
`<student>+<assignment>+<timestamp>+<random>` and nbgrader trusts the name; release_feedback.py: pages are
named by a hash of the submission's secret) is hardened here: each student's sandbox holds only its own
inbound and feedback folders, and collect takes the student from the folder (coursekit.hub.exchange).
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
from hub_support import ROOT, ClassHub

from coursekit.hub.limits import CGROUP_V1

PROBE = r"""
import glob, json, os
host = {host!r}
found = {{
    "homes": sorted(os.listdir("/home")),
    "exchange": sorted(glob.glob("/srv/nbgrader/exchange/{course_id}/*/*")),
    "host_paths": [p for p in host if os.path.exists(p)],
    "uid": os.getuid(),
    "kit": sorted(os.listdir("/srv/coursekit/python")),  # the kit's validate extension, alone
    "other_processes": [p for p in os.listdir("/proc") if p.isdigit() and
                        open(f"/proc/{{p}}/cmdline", "rb").read().split(b"\0")[0].endswith(b"jupyterhub")],
}}
try:  # a submission named for bob, dropped into alice's inbound folder
    os.makedirs("/srv/nbgrader/exchange/{course_id}/inbound/bob+lesson11+2030-01-01 00:00:00.000000 UTC+x")
    open("/srv/nbgrader/exchange/{course_id}/inbound/bob+lesson11+2030-01-01 00:00:00.000000 UTC+x/lesson11.ipynb",
         "w").write(open("lesson11/lesson11.ipynb").read())
    found["forged"] = True
except OSError as exc:
    found["forged"] = str(exc)
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def class_with_submissions(class_hub: ClassHub) -> ClassHub:
    """lesson11 released and submitted by both students, all through the hub's APIs."""
    teacher = class_hub.login("teacher")
    teacher.start_server()
    listing = teacher.server("GET", "formgrader/api/assignment/lesson11").json()
    if listing.get("status") != "released":
        assert teacher.server("POST", "formgrader/api/assignment/lesson11/assign").json()["success"]
        assert teacher.server("POST", "formgrader/api/assignment/lesson11/release").json()["success"]
    for user in ("alice", "bob"):
        student = class_hub.login(user)
        student.start_server()
        assert student.nbgrader("fetch", course_id=class_hub.layout.course_id, assignment_id="lesson11")["success"] or \
            (class_hub.layout.home(user) / "lesson11").is_dir()
        assert student.nbgrader("submit", course_id=class_hub.layout.course_id, assignment_id="lesson11")["success"]
    return class_hub


def test_a_student_reaches_only_her_own_files(class_with_submissions: ClassHub) -> None:
    hub = class_with_submissions
    alice = hub.login("alice")
    course, state = hub.layout.course, hub.layout.state
    host = [str(course / "source" / "lesson11" / "lesson11.ipynb"), str(course / "gradebook.db"),
            str(hub.layout.home("bob")), str(hub.layout.exchange_course() / "inbound" / "bob"),
            str(state / "passwords.csv"), str(state / "accounts.json"),
            str(ROOT / "autograder" / "source"), str(ROOT / "solutions"), str(ROOT / "lessons"), str(ROOT / "src")]
    ran = alice.run_code(PROBE.format(host=host, course_id=hub.layout.course_id))
    assert ran["error"] is None, ran
    found = json.loads(ran["stdout"])
    assert found["homes"] == ["alice"]
    assert all("/bob" not in p and "bob+" not in p for p in found["exchange"]), found["exchange"]
    assert [p for p in found["exchange"] if "/inbound/alice+lesson11+" in p], found["exchange"]  # her own
    assert found["host_paths"] == [], "the course, hidden tests, gradebook, passwords or bob's files are visible"
    assert found["uid"] == 20001 and found["other_processes"] == []
    assert found["kit"] == ["coursekit_hub_validate.py"], found["kit"]

    # the forged submission lands in alice's own folder; collect does not take it as bob's
    assert found["forged"] is True
    teacher = hub.login("teacher")
    log = teacher.server("POST", "formgrader/api/assignment/lesson11/collect").json()["log"]
    assert "not named for the student whose folder holds it" in log, log
    assert "2030-01-01" not in (hub.layout.course / "submitted" / "bob" / "lesson11" / "timestamp.txt").read_text()


def test_validate_on_a_students_server_gives_the_reason_then_her_own_line(class_with_submissions: ClassHub) -> None:
    """nbgrader's Validate URL on alice's own server (the lab extension's request), on a copy of the released
    notebook with its blanks still empty: each failed check is its reason, then her line (issue 33)."""
    hub = class_with_submissions
    blank = hub.layout.home("alice") / "lesson11" / "blank.ipynb"
    shutil.copyfile(hub.layout.course / "release" / "lesson11" / "lesson11.ipynb", blank)
    os.chown(blank, 20001, 20001)  # alice's uid in her sandbox
    alice = hub.login("alice")
    reply = alice.server("POST", "assignments/validate", data={"path": "lesson11/blank.ipynb"})
    reply.raise_for_status()
    answer = reply.json()
    assert answer["success"], answer
    tests = [cell for cell in answer["value"]["failed"] if cell["error"] != "未作答。"]
    assert tests, answer
    for cell in tests:
        assert cell["source"] == "NameError: name '______' is not defined", cell
        assert cell["error"].startswith("（出错位置：第 1 个代码格第 "), cell
        assert cell["error"].endswith("行：var = ______）"), cell


def test_a_student_cannot_use_another_server_or_formgrader(class_with_submissions: ClassHub) -> None:
    alice = class_with_submissions.login("alice")
    assert alice.server("GET", "api/contents", user="bob").status_code in (302, 403, 404)
    assert alice.server("GET", "api/contents", user="teacher").status_code in (302, 403, 404)
    assert alice.hub("GET", "users/bob").status_code in (403, 404)  # JupyterHub 5+: 404, no existence leak
    assert alice.server("GET", "formgrader/api/assignments").status_code == 404  # not loaded for students
    assert alice.server("GET", "api/contents").status_code == 200


def test_a_student_server_has_its_limits(class_with_submissions: ClassHub) -> None:
    """1 core and 768M for the class's students (conftest): the server's processes are in a cgroup with that
    CPU quota, and a kernel taking 1.5 GiB is killed while the server lives on."""
    hub = class_with_submissions
    cpu = CGROUP_V1 / "cpu" / hub.layout.cgroup_parent / "alice"
    assert int((cpu / "cpu.cfs_quota_us").read_text()) == int((cpu / "cpu.cfs_period_us").read_text())
    assert (cpu / "cgroup.procs").read_text().split(), "alice's server is not in its cgroup"
    alice = hub.login("alice")
    ran = alice.run_code("x = bytearray(1536 << 20)\nx[::4096] = b'1' * len(x[::4096])\nprint('allocated')")
    assert "allocated" not in ran["stdout"] and ran["error"], ran
    assert alice.server("GET", "api/contents").status_code == 200
