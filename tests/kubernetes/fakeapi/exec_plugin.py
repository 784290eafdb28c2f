"""A kubeconfig exec credential plugin issuing short-lived tokens (a test tool).

``python exec_plugin.py STATE TTL``: makes a new random token valid for TTL
seconds, records ``"<token> <expiry epoch>"`` in STATE (the fake server then
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


def main() -> None:
    state, ttl = Path(sys.argv[1]), float(sys.argv[2])
    token = secrets.token_hex(12)
    expiry = time.time() + ttl
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
