"""A kubeconfig exec credential plugin issuing short-lived tokens (a test tool).

``python exec_plugin.py STATE TTL [SKEW]``: makes a new random token valid
for TTL seconds (of a clock ahead of this one by the seconds written in the
file SKEW, if given: see :class:`SkewClock`), records ``"<token> <expiry epoch>"`` in STATE (the fake server then
accepts only that token, until that time, see
:meth:`FakeKubeServer.accept_tokens_from`), appends one line to
``STATE.runs`` and prints the ``ExecCredential`` with its
``expirationTimestamp``, as EKS's ``aws eks get-token`` does.
"""

from __future__ import annotations

import json
import secrets
import sys
import time
from datetime import UTC, datetime
from pathlib import Path


class SkewClock:
    """Epoch seconds ahead of the real clock by what :meth:`advance` added.

    The offset is kept in ``path`` too, for the plugin's later runs.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.skew = 0.0
        path.write_text("0")

    def __call__(self) -> float:
        return time.time() + self.skew

    def advance(self, seconds: float) -> None:
        self.skew += seconds
        self.path.write_text(repr(self.skew))


def main() -> None:
    state, ttl = Path(sys.argv[1]), float(sys.argv[2])
    skew = float(Path(sys.argv[3]).read_text()) if len(sys.argv) > 3 else 0.0
    token = secrets.token_hex(12)
    expiry = time.time() + skew + ttl
    state.write_text(f"{token} {expiry}")
    with open(f"{state}.runs", "a") as runs:
        runs.write(token + "\n")
    stamp = datetime.fromtimestamp(expiry, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    sys.stdout.write(
        json.dumps(
            {
                "apiVersion": "client.authentication.k8s.io/v1",
                "kind": "ExecCredential",
                "status": {"token": token, "expirationTimestamp": stamp},
            }
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
