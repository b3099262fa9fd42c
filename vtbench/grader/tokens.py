"""Who may call the grader: episode tokens, the operator token, and the record of denials.

Trusts the ledger (it holds only token hashes). Does not trust callers: a token reaches
only the episode whose hash it matches, the operator token is compared in constant time,
and every denial is logged and written to the ledger's events (the caller hears only
"not authorized").
"""

import hashlib
import hmac
import logging
import secrets

from vtbench import layout
from vtbench.errors import Unauthorized
from vtbench.grader.ledger import Episode, Ledger

log = logging.getLogger("vtbench.grader")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> tuple[str, str]:
    """A fresh episode token and the hash the ledger keeps of it."""
    token = secrets.token_urlsafe(32)
    return token, token_hash(token)


def operator_token() -> str:
    """The operator token of this installation, created (0600) on first use."""
    path = layout.grader_home() / "operator-token"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(secrets.token_urlsafe(32))
        tmp.chmod(0o600)
        tmp.replace(path)
    return path.read_text().strip()


class Gate:
    """Checks the tokens of one grader against its ledger and records every denial."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._operator_hash = token_hash(operator_token())

    def authenticate(self, token: str | None) -> Episode:
        episode = self.ledger.episode_for_token(token_hash(token)) if token else None
        if episode is None:
            raise Unauthorized("not authorized: unknown episode token")
        return episode

    def authorize_operator(self, token: str | None) -> None:
        if not token or not hmac.compare_digest(token_hash(token), self._operator_hash):
            raise Unauthorized("not authorized: not the operator token")

    def record_denial(self, route: str, reason: str, episode: str | None = None) -> None:
        log.warning("denied %s: %s (episode %s)", route, reason, episode)
        self.ledger.log_event(episode, "denied", route=route, reason=reason)
