"""在 JupyterLab 里做练习：打开 work/ 里你自己的那份笔记本（第一次运行时从学生包复制，以后不会覆盖）。

用法：python lab.py [--port 端口] [--no-browser]。只需要 Python 3.9 以上：第一次运行时若当前 Python 里
没有 JupyterLab，会在本文件夹建一个 .venv 并按 requirements-lab.txt 安装（需要能访问 PyPI）。
JupyterLab 只在 127.0.0.1 上提供 work/，界面为中文，没有终端，不弹新闻提示。按 Ctrl+C 停止（关闭终端或
SIGTERM 也会停止 JupyterLab 和它的内核，不会留在后台）。
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # childproc.py beside this file (also under python -I)
from childproc import exit_status, run_until_stopped  # noqa: E402

BUNDLE = json.loads((HERE / "bundle.json").read_text(encoding="utf-8"))
WORK = HERE / "work"
JUPYTER = HERE / ".jupyter"  # this bundle's own Jupyter config, settings and workspaces
LAB_PACKAGES = ("jupyterlab", "jupyterlab_language_pack_zh_CN", "ipykernel")
# JupyterLab user settings: the interface in Chinese (the language pack's locale), no news pop-up and
# no update check (both fetch from the internet).
SETTINGS = {
    "@jupyterlab/translation-extension/plugin.jupyterlab-settings": {"locale": "zh_CN"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                        "checkForUpdates": False},
}
# Server extensions a student never needs (nbgrader's instructor tools, if installed) and the lab plugins off.
SERVER = {"ServerApp": {"terminals_enabled": False, "jpserver_extensions": {
    "nbgrader.server_extensions.formgrader": False, "nbgrader.server_extensions.assignment_list": False,
    "nbgrader.server_extensions.course_list": False, "nbgrader.server_extensions.validate_assignment": False}}}
PAGE_CONFIG = {"disabledExtensions": {"@jupyter/nbgrader": True, "@jupyterlab/terminal-extension": True}}


def has_display():
    """A browser can open: not Linux, or Linux with an X or Wayland display."""
    return not sys.platform.startswith("linux") or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def can_run_lab(python):
    """Whether `python` can import every package of LAB_PACKAGES."""
    check = f"import importlib.util as u, sys; sys.exit(0 if all(u.find_spec(m) for m in {LAB_PACKAGES!r}) else 1)"
    done = subprocess.run([str(python), "-c", check], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return done.returncode == 0


def lab_python():
    """This Python if it has JupyterLab and the language pack, else the bundle's .venv (made on first use)."""
    if can_run_lab(sys.executable):
        return Path(sys.executable)
    env_dir = HERE / ".venv"
    python = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    if not python.exists():
        print(f"第一次运行：在 {env_dir} 安装 JupyterLab（需要几分钟，需要能访问 PyPI）…", flush=True)
        venv.create(env_dir, with_pip=True)
    if not can_run_lab(python):
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "-r", str(HERE / "requirements-lab.txt")],
                       check=True)
    return python


def prepare():
    """work/<notebook> (copied once, never overwritten) and this bundle's Jupyter config; the copy's path."""
    WORK.mkdir(exist_ok=True)
    mine = WORK / BUNDLE["notebook"]
    if not mine.exists():
        shutil.copyfile(HERE / BUNDLE["notebook"], mine)
        print(f"已创建你的笔记本 {mine}")
    else:
        print(f"继续使用你的笔记本 {mine}")
    for name, value in SETTINGS.items():
        path = JUPYTER / "lab" / "user-settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value, indent=1) + "\n", encoding="utf-8")
    (JUPYTER / "config" / "labconfig").mkdir(parents=True, exist_ok=True)
    (JUPYTER / "config" / "jupyter_server_config.json").write_text(json.dumps(SERVER, indent=1) + "\n",
                                                                   encoding="utf-8")
    (JUPYTER / "config" / "labconfig" / "page_config.json").write_text(json.dumps(PAGE_CONFIG, indent=1) + "\n",
                                                                       encoding="utf-8")
    return mine


def environment(env):
    """`env` with Jupyter's config, settings and workspaces in this bundle (not the user's own)."""
    return {**env, "JUPYTER_CONFIG_DIR": str(JUPYTER / "config"), "JUPYTER_CONFIG_PATH": str(JUPYTER / "config"),
            "JUPYTERLAB_SETTINGS_DIR": str(JUPYTER / "lab" / "user-settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(JUPYTER / "lab" / "workspaces")}


def command(python, notebook, port, open_browser, token=None):
    cmd = [str(python), "-m", "jupyterlab", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           "--ServerApp.port_retries=50", "--ServerApp.terminals_enabled=False",
           f"--ServerApp.root_dir={notebook.parent}", f"--LabApp.default_url=/lab/tree/{notebook.name}"]
    if not open_browser:
        cmd.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # containers run as root; JupyterLab refuses that unless told
        cmd.append("--ServerApp.allow_root=True")
    if token is not None:
        cmd.append(f"--IdentityProvider.token={token}")
    return cmd


def main(argv=None):
    parser = argparse.ArgumentParser(description="JupyterLab on 127.0.0.1 with your copy of the exercise notebook")
    parser.add_argument("--port", type=int, default=0, help="端口（默认：任意一个空闲端口）")
    parser.add_argument("--no-browser", action="store_true", help="不自动打开浏览器（没有图形界面时自动如此）")
    parser.add_argument("--token", default=None, help=argparse.SUPPRESS)  # tests
    args = parser.parse_args(argv)
    notebook = prepare()
    print(f"做完后自查：python check.py {notebook.relative_to(HERE)}", flush=True)
    try:
        python = lab_python()
    except KeyboardInterrupt:
        print("已停止（JupyterLab 还没有装好，下次运行 python lab.py 会接着安装）", file=sys.stderr)
        return exit_status(signal.SIGINT)
    cmd = command(python, notebook, args.port or free_port(), not args.no_browser and has_display(), args.token)
    code, stopped_by = run_until_stopped(cmd, cwd=WORK, env=environment(os.environ))
    if stopped_by is None:
        return code
    print(f"JupyterLab 已停止；你的笔记本保存在 {notebook}", file=sys.stderr)
    return exit_status(stopped_by)


if __name__ == "__main__":
    sys.exit(main())
