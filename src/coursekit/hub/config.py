"""JupyterHub's configuration for the class, from what `coursekit hub start` wrote to hub.json."""

from __future__ import annotations

import json
from pathlib import Path

from coursekit.hub.settings import HubLayout

ROOT = Path(__file__).resolve().parents[3]


def configure(c, state_dir: str) -> None:  # noqa: ANN001 - traitlets' config object
    """Fill JupyterHub's config `c` (jupyterhub_config.py calls this)."""
    layout = HubLayout(Path(state_dir))
    hub = json.loads(layout.hub_json.read_text(encoding="utf-8"))
    runtime = layout.runtime
    c.JupyterHub.bind_url = f"http://127.0.0.1:{hub['port']}"
    c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{hub['hub_port']}"
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{hub['proxy_api_port']}"
    c.ConfigurableHTTPProxy.command = [str(ROOT / "node_modules" / ".bin" / "configurable-http-proxy")]
    c.ConfigurableHTTPProxy.pid_file = str(runtime / "proxy.pid")
    c.JupyterHub.db_url = f"sqlite:///{runtime / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(runtime / "cookie_secret")
    c.JupyterHub.pid_file = str(runtime / "jupyterhub.pid")
    c.JupyterHub.cleanup_servers = True
    c.JupyterHub.cleanup_proxy = True

    c.JupyterHub.authenticator_class = "coursekit.hub.auth.RosterAuthenticator"
    c.RosterAuthenticator.accounts_file = str(layout.accounts_json)
    c.Authenticator.allowed_users = set(hub["students"]) | {hub["instructor"]}
    c.Authenticator.admin_users = set()  # the instructor needs no access to students' servers

    c.JupyterHub.spawner_class = "coursekit.hub.spawner.ClassSpawner"
    c.ClassSpawner.state_dir = str(layout.state)
    c.ClassSpawner.instructor = hub["instructor"]
    c.ClassSpawner.student_uids = hub["uids"]
    c.ClassSpawner.student_cpu = hub["student"]["cpu"]
    c.ClassSpawner.student_memory = hub["student"]["memory"]
    c.ClassSpawner.instructor_cpu = hub["instructor_resources"]["cpu"]
    c.ClassSpawner.instructor_memory = hub["instructor_resources"]["memory"]
    c.Spawner.default_url = "/lab"
    c.Spawner.start_timeout = 180
    c.Spawner.http_timeout = 180
    c.Spawner.env_keep = ["LANG", "LC_ALL"]
    c.Spawner.environment = {"PYTHONDONTWRITEBYTECODE": "1"}
