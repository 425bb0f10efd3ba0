"""The attack matrix's hostile-archive class (issue 23, class 5): an LMS zip built to stop or steer
`make grade`. Each variant gives a report row naming the member (or, for a zip that cannot be opened
at all, one line), and every honest student in the same zip is graded.

Zip structure (local header at member.header_offset: method at +8, CRC at +14, sizes at +18/+22;
central directory entry: method at +10, CRC at +16, sizes at +20/+24) follows PKWARE's APPNOTE 4.3.7
and 4.3.12, as CPython's Lib/zipfile.py reads them (structFileHeader, structCentralDir).
"""

from __future__ import annotations

import copy
import csv
import io
import json
import stat
import struct
import zipfile
import zlib
from pathlib import Path

import nbformat
import pytest
from grading_support import CELL_TIMEOUT, fresh_copy, make_course
from submission_kinds import k_correct

from coursekit.cli import main
from coursekit.errors import CourseError
from coursekit.grading.intake import ingest
from coursekit.grading.intake.ingest import find_candidates, select_notebook
from coursekit.grading.judge import flags as F

COURSE_SOURCE = "../../source/lesson11/lesson11.ipynb"
NOTEBOOK = json.dumps(nbformat.v4.new_notebook()).encode()


def _patch_member(data: bytearray, info: zipfile.ZipInfo, central: int, method: int, crc: int, size: int) -> None:
    """Rewrite a member's method, CRC and uncompressed size in its local header and central entry."""
    local = info.header_offset
    struct.pack_into("<H", data, local + 8, method)
    struct.pack_into("<I", data, local + 14, crc)
    struct.pack_into("<I", data, local + 22, size)
    struct.pack_into("<H", data, central + 10, method)
    struct.pack_into("<I", data, central + 16, crc)
    struct.pack_into("<I", data, central + 24, size)


def truncated_deflate(archive: Path, name: str, payload: bytes, others: dict[str, bytes]) -> None:
    """A zip whose member `name` is a deflate stream that stops before its end (no final block)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    stream = packer.compress(payload) + packer.flush(zlib.Z_SYNC_FLUSH)
    stream = stream[: len(stream) * 2 // 3]
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(name, stream)  # stored: its sizes are the stream's; patched to deflate below
        for other, content in others.items():
            zf.writestr(other, content)
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo(name)
    central = data.index(b"PK\x01\x02")  # the first member's central entry
    _patch_member(data, info, central, zipfile.ZIP_DEFLATED, zlib.crc32(payload), len(payload))
    archive.write_bytes(bytes(data))


def bad_crc(archive: Path, name: str, others: dict[str, bytes]) -> None:
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(name, NOTEBOOK)
        for other, content in others.items():
            zf.writestr(other, content)
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo(name)
    central = data.index(b"PK\x01\x02")
    _patch_member(data, info, central, zipfile.ZIP_DEFLATED, info.CRC ^ 0xFFFF, info.file_size)
    archive.write_bytes(bytes(data))


def plain(archive: Path, members: list[tuple[str | zipfile.ZipInfo, bytes]]) -> None:
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, content in members:
            zf.writestr(name, content)


def symlink_member(name: str, target: str) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.create_system = 3  # unix: the mode is in the high 16 bits of external_attr
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info, target.encode()


HONEST = {"honest_a.ipynb": NOTEBOOK, "honest_b/hw.ipynb": NOTEBOOK}

# variant: (writer of the zip, student id of the row, member named in the flag, text of the reason)
VARIANTS = {
    "truncated_deflate": (lambda a: truncated_deflate(a, "mallory.ipynb", NOTEBOOK * 40, HONEST),
                          "mallory", "mallory.ipynb", "corrupt in the zip"),
    "bad_crc": (lambda a: bad_crc(a, "mallory/hw.ipynb", HONEST), "mallory", "mallory/hw.ipynb", "corrupt"),
    "zip_bomb_ratio": (lambda a: plain(a, [*HONEST.items(), ("mallory.ipynb", b"\0" * (8 << 20))]),
                       "mallory", "mallory.ipynb", "zip bomb"),
    "dot_dot_name": (lambda a: plain(a, [*HONEST.items(), ("../../mallory.ipynb", NOTEBOOK)]),
                     "../../mallory.ipynb", "../../mallory.ipynb", "unsafe name"),
    "dot_dot_inside_folder": (lambda a: plain(a, [*HONEST.items(), ("mallory/../../x.ipynb", NOTEBOOK)]),
                              "mallory/../../x.ipynb", "mallory/../../x.ipynb", "unsafe name"),
    "absolute_name": (lambda a: plain(a, [*HONEST.items(), ("/tmp/mallory.ipynb", NOTEBOOK)]),
                      "/tmp/mallory.ipynb", "/tmp/mallory.ipynb", "unsafe name"),
    "windows_dot_dot": (lambda a: plain(a, [*HONEST.items(), ("..\\mallory.ipynb", NOTEBOOK)]),
                        "../mallory.ipynb", "../mallory.ipynb", "unsafe name"),
    "symlink_to_the_course": (lambda a: plain(a, [*HONEST.items(), symlink_member("mallory.ipynb", COURSE_SOURCE)]),
                              "mallory", "mallory.ipynb", "symbolic link"),
    "duplicate_names": (lambda a: plain(a, [*HONEST.items(), ("mallory.ipynb", NOTEBOOK), ("mallory.ipynb", b"{}")]),
                        "mallory", "mallory.ipynb", "appears 2 times"),
    "file_and_folder_of_one_name": (lambda a: plain(a, [*HONEST.items(), ("mallory", NOTEBOOK),
                                                        ("mallory/hw.ipynb", NOTEBOOK)]),
                                    "mallory", "mallory/hw.ipynb", "cannot be extracted"),
    "python_file": (lambda a: plain(a, [*HONEST.items(), ("mallory.py", b"print(1)\n")]),
                    "mallory", "mallory.py", "not a notebook (.py file)"),
    "pdf": (lambda a: plain(a, [*HONEST.items(), ("mallory/hw.pdf", b"%PDF-1.7\n")]),
            "mallory", "mallory/hw.pdf", "not a notebook (.pdf file)"),
    "notebook_saved_as_txt": (lambda a: plain(a, [*HONEST.items(), ("mallory.ipynb.txt", NOTEBOOK)]),
                              "mallory", "mallory.ipynb.txt", "a notebook saved as .txt"),
}


def rows_of(course, archive: Path) -> dict[str, list[str]]:
    return {sid: select_notebook(sid, cands).flags for sid, cands in find_candidates(course, archive).items()}


@pytest.fixture
def course(tmp_path):
    return make_course(tmp_path / "course")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_each_hostile_member_is_one_row_naming_it_and_the_honest_are_read(variant, course, tmp_path):
    write, student, member, reason = VARIANTS[variant]
    archive = tmp_path / "class.zip"
    write(archive)
    rows = rows_of(course, archive)
    for honest in ("honest_a", "honest_b"):
        assert rows[honest] == [], (honest, rows[honest])
    flags = rows[student]
    text = " ".join(flags)
    assert f"class.zip:{member}" in text and reason in text, flags
    assert F.flag_name(flags[0]) in (F.INVALID_NOTEBOOK, F.UNKNOWN_STUDENT_ID)
    assert all(not p.is_symlink() for p in (course.ingest_dir / "unzipped").rglob("*"))
    assert not (tmp_path / "mallory.ipynb").exists() and not Path("/tmp/mallory.ipynb").exists()


def test_the_whole_zip_is_limited_on_the_bytes_really_written(course, tmp_path, monkeypatch):
    monkeypatch.setattr(ingest, "MAX_ZIP_BYTES", 3 * len(NOTEBOOK))
    archive = tmp_path / "class.zip"
    plain(archive, [("a.ipynb", NOTEBOOK), ("b.ipynb", NOTEBOOK), ("c.ipynb", NOTEBOOK), ("d.ipynb", NOTEBOOK)])
    rows = rows_of(course, archive)
    assert [sid for sid, flags in rows.items() if not flags] == ["a", "b", "c"]
    assert "expands past" in rows["d"][0] and "class.zip:d.ipynb" in rows["d"][0]


def test_a_member_over_the_size_limit_is_left_out(course, tmp_path, monkeypatch):
    monkeypatch.setattr(ingest, "MAX_MEMBER_BYTES", 1 << 20)
    archive = tmp_path / "class.zip"
    plain(archive, [("honest_a.ipynb", NOTEBOOK), ("mallory.ipynb", bytes(range(256)) * (8 << 10))])
    rows = rows_of(course, archive)
    assert rows["honest_a"] == [] and "more than the 1 MB allowed" in rows["mallory"][0]


def test_a_zip_that_cannot_be_opened_is_one_line(course, tmp_path):
    archive = tmp_path / "class.zip"
    plain(archive, list(HONEST.items()))
    data = archive.read_bytes()
    archive.write_bytes(data[:-10])  # the end of the central directory is cut off
    with pytest.raises(CourseError, match=r"class\.zip") as caught:
        find_candidates(course, archive)
    assert "\n" not in str(caught.value)


def test_a_link_in_a_submissions_folder_is_not_followed(course, tmp_path):
    subs = tmp_path / "subs"
    (subs / "mallory").mkdir(parents=True)
    (subs / "honest_a.ipynb").write_bytes(NOTEBOOK)
    (subs / "mallory" / "hw.ipynb").symlink_to(course.source_notebook)
    (subs / "trudy.ipynb").symlink_to(course.source_notebook)
    (subs / "victor").symlink_to(course.source_notebook.parent, target_is_directory=True)
    rows = rows_of(course, subs)
    assert rows["honest_a"] == []
    for sid in ("mallory", "trudy"):
        assert "symbolic link, not followed" in rows[sid][0], rows[sid]
    assert sid in rows and "symbolic link" in rows["victor"][0]


@pytest.fixture(scope="module")
def hostile_zip_graded(release_template, tmp_path_factory):
    """Every variant's hostile member in one zip beside two honest, solved students, graded by `coursekit grade`."""
    course = fresh_copy(release_template, tmp_path_factory.mktemp("archive") / "course")
    solved = json.dumps(k_correct(copy.deepcopy(nbformat.read(course.release_notebook, as_version=4)))).encode()
    archive = tmp_path_factory.mktemp("archive-lms") / "class.zip"
    _combined(archive, [("honest_a.ipynb", solved), ("honest_b/hw.ipynb", solved)])
    code = main(["grade", str(archive), "--course", str(course.root), "--timeout", CELL_TIMEOUT])
    text = course.report_csv.read_text(encoding="utf-8")
    return code, {r["student_id"]: r for r in csv.DictReader(io.StringIO(text))}


def _combined(archive: Path, honest: list) -> None:
    """One zip: the honest students, then each variant's hostile members renamed per variant."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, content in honest:
            zf.writestr(name, content)
        zf.writestr("p_script.py", b"print(1)\n")
        zf.writestr("t_text.ipynb.txt", NOTEBOOK)
        zf.writestr("../../escape.ipynb", NOTEBOOK)
        zf.writestr("/tmp/absolute.ipynb", NOTEBOOK)
        zf.writestr(*symlink_member("link.ipynb", COURSE_SOURCE))
        zf.writestr("twice.ipynb", NOTEBOOK)
        zf.writestr("twice.ipynb", b"{}")
        zf.writestr("bomb.ipynb", b"\0" * (8 << 20))
    with zipfile.ZipFile(archive, "a", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("crc.ipynb", NOTEBOOK)
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo("crc.ipynb")
    central = data.rindex(b"PK\x01\x02")
    _patch_member(data, info, central, zipfile.ZIP_DEFLATED, info.CRC ^ 0xFFFF, info.file_size)
    archive.write_bytes(bytes(data))


def test_a_hostile_zip_grades_every_honest_student_and_names_every_bad_member(hostile_zip_graded):
    code, rows = hostile_zip_graded
    assert code == 0
    for honest in ("honest_a", "honest_b"):
        assert rows[honest]["total"] == "3" and rows[honest]["flags"] == "", rows[honest]
    expected = {"p_script": "not a notebook (.py file)", "t_text": "a notebook saved as .txt",
                "../../escape.ipynb": "unsafe name", "/tmp/absolute.ipynb": "unsafe name",
                "link": "symbolic link", "twice": "appears 2 times", "bomb": "zip bomb", "crc": "corrupt in the zip"}
    for sid, reason in expected.items():
        assert reason in rows[sid]["flags"] and rows[sid]["total"] == "0", (sid, rows[sid])
