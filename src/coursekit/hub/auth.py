"""The trial class's authenticator: the roster's accounts, each with its own password (hashed on disk)."""

from __future__ import annotations

import json

from jupyterhub.auth import Authenticator
from traitlets import Unicode

from coursekit.hub.settings import check_password


class RosterAuthenticator(Authenticator):
    """Accepts a user of the roster whose password matches the PBKDF2 hash in `accounts_file`.

    JupyterHub's DummyAuthenticator has one password for everybody (any student could log in as any
    other); PAM needs Unix accounts. This one needs neither. For a school, swap it for
    ltiauthenticator's LTI13Authenticator or an oauthenticator class (docs/hub.md)."""

    accounts_file = Unicode(help="JSON {user: pbkdf2 hash} written by `coursekit hub`").tag(config=True)

    def check_allowed(self, username, authentication=None):  # noqa: ANN001 - JupyterHub's signature
        return username in self._accounts()

    def _accounts(self) -> dict[str, str]:
        with open(self.accounts_file, encoding="utf-8") as f:
            return json.load(f)

    async def authenticate(self, handler, data):  # noqa: ANN001 - JupyterHub's signature
        username, password = data.get("username", ""), data.get("password", "")
        stored = self._accounts().get(username)
        if stored and check_password(password, stored):
            return username
        self.log.warning("failed login for %r", username)
        return None
