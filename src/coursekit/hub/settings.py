"""The class on the hub, read from the `hub:` section of course.yml, and the accounts' passwords."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

import yaml

from coursekit.errors import CourseError

USERNAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")  # a JupyterHub name that is also a safe folder and nbgrader id
SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?", re.IGNORECASE)
PBKDF2_ROUNDS = 200_000
COURSE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")  # a folder name in nbgrader's exchange


@dataclass(frozen=True)
class Resources:
    """One server's limits: CPU cores (a fraction is a share of one core) and memory in bytes."""

    cpu: float
    memory: int


@dataclass(frozen=True)
class HubSettings:
    """course.yml's `hub:` section."""

    instructor: str
    students: tuple[str, ...]
    student: Resources
    instructor_resources: Resources
    port: int = 8000
    course_id: str = "course"  # nbgrader's course id: the course's, not one lesson's (each lesson is an assignment)

    @property
    def users(self) -> tuple[str, ...]:
        return (self.instructor, *self.students)


def parse_size(where: str, value: object) -> int:
    """'1G', '512M', '2GiB' or a number of bytes -> bytes."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    match = SIZE.fullmatch(str(value).strip())
    if not match:
        raise CourseError(f"{where}: memory must be like 512M or 2G, got {value!r}")
    return int(float(match[1]) * 1024 ** "_KMGT".index(match[2].upper() or "_"))


def _resources(where: str, item: object) -> Resources:
    if not isinstance(item, dict) or set(item) - {"cpu", "memory"}:
        raise CourseError(f"{where}: expected {{cpu: CORES, memory: SIZE}}, got {item!r}")
    cpu = item.get("cpu", 1)
    if isinstance(cpu, bool) or not isinstance(cpu, int | float) or cpu <= 0:
        raise CourseError(f"{where}: cpu must be a positive number of cores, got {cpu!r}")
    return Resources(float(cpu), parse_size(where, item.get("memory", "1G")))


def load_hub_settings(course_file: Path) -> HubSettings:
    """The `hub:` section of course_file; CourseError naming the file and the problem."""
    try:
        data = yaml.safe_load(course_file.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise CourseError(f"{course_file}: cannot read the course file ({exc})") from None
    hub = data.get("hub")
    where = f"{course_file}: hub"
    if not isinstance(hub, dict):
        raise CourseError(f"{where}: missing; add a 'hub:' section with instructor, students and resources")
    unknown = set(hub) - {"instructor", "students", "resources", "port", "course_id"}
    if unknown:
        raise CourseError(f"{where}: unknown key '{sorted(unknown)[0]}'")
    instructor, students = hub.get("instructor"), hub.get("students")
    if not isinstance(students, list) or not students:
        raise CourseError(f"{where}: 'students' must be a non-empty list of user names")
    names = [instructor, *students]
    for name in names:
        if not isinstance(name, str) or not USERNAME.fullmatch(name):
            raise CourseError(f"{where}: user name {name!r} must match {USERNAME.pattern}")
    if len(set(names)) != len(names):
        raise CourseError(f"{where}: a user name is listed twice")
    resources = hub.get("resources") or {}
    port = hub.get("port", 8000)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise CourseError(f"{where}: port must be a TCP port number, got {port!r}")
    course_id = hub.get("course_id", HubSettings.course_id)
    if not isinstance(course_id, str) or not COURSE_ID.fullmatch(course_id):
        raise CourseError(f"{where}: course_id {course_id!r} must match {COURSE_ID.pattern}")
    return HubSettings(instructor, tuple(students), _resources(f"{where}: resources: student",
                                                              resources.get("student", {})),
                       _resources(f"{where}: resources: instructor", resources.get("instructor", {})), port,
                       course_id)


def password_hash(password: str, salt: str | None = None) -> str:
    salt = salt or secrets.token_hex(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt), PBKDF2_ROUNDS).hex()
    return f"pbkdf2_sha256${PBKDF2_ROUNDS}${salt}${digest}"


def check_password(password: str, stored: str) -> bool:
    import hmac

    try:
        _, rounds, salt, digest = stored.split("$")
    except ValueError:
        return False
    mine = hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt), int(rounds)).hex()
    return hmac.compare_digest(mine, digest)


def ensure_accounts(users: tuple[str, ...], passwords_csv: Path, accounts_json: Path) -> dict[str, str]:
    """Every user's password: kept from passwords_csv (user,password; 0600), new random ones added for
    users it lacks. Writes accounts_json (the hashes the hub checks); returns {user: password}."""
    passwords: dict[str, str] = {}
    if passwords_csv.is_file():
        for row in csv.reader(passwords_csv.read_text(encoding="utf-8").splitlines()):
            if len(row) != 2 or row[0] == "user":
                continue
            passwords[row[0]] = row[1]
    for user in users:
        passwords.setdefault(user, secrets.token_urlsafe(9))
    passwords = {user: passwords[user] for user in users}
    passwords_csv.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(passwords_csv, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write("user,password\n" + "".join(f"{u},{p}\n" for u, p in passwords.items()))
    os.chmod(passwords_csv, 0o600)
    hashes = {user: password_hash(password) for user, password in passwords.items()}
    accounts_json.write_text(json.dumps(hashes, indent=1) + "\n", encoding="utf-8")
    os.chmod(accounts_json, 0o600)
    return passwords


@dataclass(frozen=True)
class HubLayout:
    """Where the hub keeps the class (default build/hub, gitignored)."""

    state: Path

    @property
    def course_id(self) -> str:  # course.yml's hub: course_id, as `coursekit hub start` wrote it to hub.json
        try:
            return json.loads(self.hub_json.read_text(encoding="utf-8"))["course_id"]
        except (OSError, ValueError, KeyError):
            return HubSettings.course_id

    @property
    def course(self) -> Path:  # the instructor's nbgrader course folder (their server's root)
        return self.state / "course"

    @property
    def exchange(self) -> Path:  # nbgrader's exchange root: <course_id>/{outbound,inbound/<s>,feedback/<s>}
        return self.state / "exchange"

    def exchange_course(self) -> Path:
        return self.exchange / self.course_id

    def home(self, user: str) -> Path:
        return self.state / "homes" / user

    def config(self, role: str) -> Path:  # JUPYTER_CONFIG_PATH of "student" or "instructor" servers
        return self.state / "config" / role

    def passwd(self, user: str) -> Path:  # /etc/passwd inside a student's sandbox
        return self.state / "etc" / f"passwd-{user}"

    @property
    def passwords_csv(self) -> Path:
        return self.state / "passwords.csv"

    @property
    def accounts_json(self) -> Path:
        return self.state / "accounts.json"

    @property
    def hub_json(self) -> Path:  # what the launcher decided (ports, users, limits) for jupyterhub_config.py
        return self.state / "hub.json"

    @property
    def runtime(self) -> Path:  # the hub's database, cookie secret, logs
        return self.state / "runtime"

    @property
    def pid_file(self) -> Path:
        return self.state / "hub.pid"

    @property
    def cgroup_parent(self) -> str:
        return "coursekit-hub-" + hashlib.sha256(str(self.state.resolve()).encode()).hexdigest()[:10]
