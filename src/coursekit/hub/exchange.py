"""nbgrader's directory exchange with one inbound and one feedback folder per student.

Each student's server sees (bubblewrap binds, coursekit.hub.spawner) the released assignments read-only,
`inbound/<student>/` as the course's inbound folder and `feedback/<student>/` as its feedback folder, so
stock nbgrader submits and fetches feedback unchanged. The instructor's collect and release_feedback are
these two subclasses: collect looks in every student's folder and takes the student id from the folder
(a submission named for somebody else is skipped); feedback goes to the student's own folder.
"""

from __future__ import annotations

import glob
import os
import shutil

from nbgrader.exchange.default.collect import ExchangeCollect, groupby
from nbgrader.exchange.default.release_feedback import ExchangeReleaseFeedback
from nbgrader.utils import notebook_hash, parse_utc


class CollectPerStudent(ExchangeCollect):
    def init_src(self):
        super().init_src()  # the checks, the due date; its records (a flat inbound/) are replaced below
        student = self.coursedir.student_id or "*"
        records = []
        for path in glob.glob(os.path.join(self.inbound_path, student, f"*+{self.coursedir.assignment_id}+*")):
            folder, name = os.path.basename(os.path.dirname(path)), os.path.basename(path)
            parts = name.rsplit("+", 3)
            if len(parts) < 3 or parts[0] != folder:
                self.log.warning("skipping %s: not named for the student whose folder holds it", path)
                continue
            records.append({"username": folder, "filename": f"{folder}/{name}", "timestamp": parse_utc(parts[2])})
        by_student = groupby(records, lambda r: r["username"]).values()
        self.src_records = [max(group, key=lambda r: r["timestamp"]) for group in by_student]


class ReleaseFeedbackPerStudent(ExchangeReleaseFeedback):
    released: list[str]  # the pages this release wrote (`coursekit hub feedback` counts them)

    def copy_files(self):
        self.released = []
        exclude = set(filter(None, (self.coursedir.student_id_exclude or "").split(",")))
        for html in sorted(glob.glob(os.path.join(self.src_path, "*.html"))):
            folder = os.path.dirname(html)  # feedback/<student>/<assignment>
            student = os.path.basename(os.path.dirname(folder))
            if student in exclude:
                continue
            with open(os.path.join(folder, "submission_secret.txt"), encoding="utf-8") as fh:
                secret = fh.read()
            notebook_id = os.path.splitext(os.path.basename(html))[0]
            target = os.path.join(self.dest_path, student)
            os.makedirs(target, exist_ok=True)
            name = notebook_hash(secret=secret, notebook_id=notebook_id)
            shutil.copy(html, os.path.join(target, f"{name}-tmp.html"))
            os.replace(os.path.join(target, f"{name}-tmp.html"), os.path.join(target, f"{name}.html"))
            self.released.append(os.path.join(target, f"{name}.html"))
            self.log.info("Released feedback for %s on %s/%s", student, self.coursedir.assignment_id, notebook_id)
