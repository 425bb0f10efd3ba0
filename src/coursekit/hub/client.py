"""A small client of the class's hub as a user sees it: log in through the login form, take an API
token, start the server, call the server's APIs (nbgrader's assignment list, contents, kernels).
The tests and bench/bench_hub.py act as students and instructors through it."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field

import requests

TIMEOUT = 120


@dataclass
class UserSession:
    base: str  # http://127.0.0.1:PORT
    user: str
    http: requests.Session = field(default_factory=requests.Session)
    token: str = ""

    @classmethod
    def login(cls, base: str, user: str, password: str) -> UserSession:
        """Log in through the hub's login form and take an API token; raise if the hub refuses."""
        me = cls(base.rstrip("/"), user)
        me.http.get(f"{me.base}/hub/login", timeout=TIMEOUT)
        reply = me.http.post(f"{me.base}/hub/login", allow_redirects=False, timeout=TIMEOUT,
                             data={"username": user, "password": password, "_xsrf": me.http.cookies.get("_xsrf")})
        if reply.status_code != 302:
            raise PermissionError(f"{user}: login refused (HTTP {reply.status_code})")
        reply = me.http.post(f"{me.base}/hub/api/users/{user}/tokens", json={"note": "coursekit client"},
                             headers={"X-XSRFToken": me.http.cookies.get("_xsrf")}, timeout=TIMEOUT)
        reply.raise_for_status()
        me.token = reply.json()["token"]
        return me

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"}

    def hub(self, method: str, path: str, **kw) -> requests.Response:
        return requests.request(method, f"{self.base}/hub/api/{path}", headers=self.headers, timeout=TIMEOUT, **kw)

    def server(self, method: str, path: str, user: str | None = None, **kw) -> requests.Response:
        """A request to the single-user server of `user` (default: oneself), with one's own token."""
        return requests.request(method, f"{self.base}/user/{user or self.user}/{path}", headers=self.headers,
                                timeout=TIMEOUT, allow_redirects=False, **kw)

    def start_server(self, timeout: float = 180) -> float:
        """Start one's server and wait until it is ready; return the seconds it took."""
        t0 = time.monotonic()
        reply = self.hub("POST", f"users/{self.user}/server")
        if reply.status_code not in (201, 202, 400):  # 400: already running
            raise RuntimeError(f"{self.user}: spawn failed (HTTP {reply.status_code}) {reply.text[:200]}")
        while time.monotonic() - t0 < timeout:
            if self.hub("GET", f"users/{self.user}").json()["servers"].get("", {}).get("ready"):
                return time.monotonic() - t0
            time.sleep(0.5)
        raise TimeoutError(f"{self.user}: server not ready after {timeout} s")

    def nbgrader(self, action: str, **params: str) -> dict:
        """nbgrader's assignment list API of one's server: fetch, submit, fetch_feedback (POST) or list."""
        if action == "list":
            reply = self.server("GET", "assignments", params=params)
        else:
            reply = self.server("POST", f"assignments/{action}", data=params)
        reply.raise_for_status()
        return reply.json()

    def run_code(self, code: str, timeout: float = 120) -> dict:
        """Run `code` in a new kernel of one's server; return {stdout, stderr, error} (the kernel is deleted)."""
        import websocket

        kernel = self.server("POST", "api/kernels", json={"name": "python3"}).json()["id"]
        ws_url = f"{self.base.replace('http', 'ws', 1)}/user/{self.user}/api/kernels/{kernel}/channels"
        ws = websocket.create_connection(ws_url, header=[f"Authorization: token {self.token}"], timeout=timeout)
        msg_id = uuid.uuid4().hex
        ws.send(json.dumps({"header": {"msg_id": msg_id, "msg_type": "execute_request", "username": self.user,
                                       "session": uuid.uuid4().hex, "version": "5.3"},
                            "parent_header": {}, "metadata": {}, "channel": "shell",
                            "content": {"code": code, "silent": False, "store_history": False,
                                        "user_expressions": {}, "allow_stdin": False}}))
        out = {"stdout": "", "stderr": "", "error": None}
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                msg = json.loads(ws.recv())
                kind, content = msg["msg_type"], msg["content"]
                if kind == "status" and content.get("execution_state") in ("restarting", "dead"):
                    out["error"] = f"kernel {content['execution_state']} (it died)"
                    break
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                if kind == "stream":
                    out[content["name"]] += content["text"]
                elif kind == "error":
                    out["error"] = f"{content['ename']}: {content['evalue']}"
                elif kind == "status" and content["execution_state"] == "idle":
                    break
        except (websocket.WebSocketException, ConnectionError, TimeoutError) as exc:
            out["error"] = f"kernel connection closed: {exc}"
        finally:
            ws.close()
            self.server("DELETE", f"api/kernels/{kernel}")
        return out


def hub_answers(base: str) -> bool:
    """Whether the hub's API root on `base` answers 200."""
    try:
        return requests.get(f"{base.rstrip('/')}/hub/api/", timeout=5).status_code == 200
    except requests.ConnectionError:
        return False


def wait_for_hub(base: str, timeout: float = 120) -> None:
    """Wait until the hub answers on `base` (its API root)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if hub_answers(base):
            return
        time.sleep(0.3)
    raise TimeoutError(f"no hub on {base} after {timeout} s")
