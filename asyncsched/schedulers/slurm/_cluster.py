"""Which Slurm cluster this is, and where it records finished jobs.

Read once per scheduler from ``scontrol show config``: the cluster's
identity (a hash of its name, controller address and where it records
finished jobs), whether it has accounting storage (``slurmdbd``), and the
job completion log's path when it writes one (``jobcomp/filetxt``). An
event cursor carries the identity, so a cursor of another cluster (or of
the same name recreated elsewhere, or switched between accounting and the
completion log) is not honoured.

Example:
    >>> text = "ClusterName = c1\\nAccountingStorageType = accounting_storage/none\\n"
    >>> info = parse_config(text + "JobCompType = jobcomp/filetxt\\nJobCompLoc = /j\\n")
    >>> info.accounting, info.jobcomp_path
    (False, '/j')
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

__all__ = ["ClusterInfo", "parse_config"]

#: the settings that make a cluster the same one for a saved cursor
_IDENTITY_KEYS = (
    "ClusterName",
    "SlurmctldHost[0]",
    "SlurmctldPort",
    "AccountingStorageType",
    "AccountingStorageHost",
    "AccountingStoragePort",
    "JobCompType",
    "JobCompLoc",
)


@dataclass(frozen=True)
class ClusterInfo:
    """What an event source needs to know of the cluster."""

    identity: str
    accounting: bool
    #: the job completion log (``jobcomp/filetxt``), or None
    jobcomp_path: str | None


def parse_config(text: str) -> ClusterInfo:
    """Read ``scontrol show config`` output (``Key = Value`` lines)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values.setdefault(key.strip(), value.strip())
    digest = hashlib.sha256(
        "\n".join(f"{k}={values.get(k, '')}" for k in _IDENTITY_KEYS).encode()
    ).hexdigest()[:16]
    accounting = "slurmdbd" in values.get("AccountingStorageType", "")
    jobcomp = values.get("JobCompLoc", "")
    filetxt = values.get("JobCompType", "").endswith("filetxt")
    return ClusterInfo(
        identity=digest,
        accounting=accounting,
        jobcomp_path=jobcomp if filetxt and jobcomp.startswith("/") else None,
    )
