"""What each partition offers (from one ``sinfo``), and whether an app can ever fit.

Every replica is one component of a heterogeneous job, and Slurm gives each
component nodes of its own: an app with more replicas than its partition has
nodes, or a replica asking more CPUs than any node has, stays PENDING forever.
:func:`check_fits` refuses such an app before anything is submitted.

Example:
    >>> parts = parse_sinfo("debug*|2000|3|4\\ngpu|1000|1|8\\n")
    >>> parts["debug"].nodes, parts["debug"].cpus, parts["debug"].default
    (3, 4, True)
"""

from __future__ import annotations

from dataclasses import dataclass

from asyncsched.errors import SpecError
from asyncsched.specs import AppDef

__all__ = [
    "SINFO_FORMAT",
    "Partition",
    "check_fits",
    "default_partition",
    "parse_sinfo",
]

#: ``sinfo -o``: name (``*`` marks the default), node memory (MB), node count,
#: CPUs per node; a partition may span several lines (one per node state)
SINFO_FORMAT = "%P|%m|%D|%c"


@dataclass
class Partition:
    """One partition: its smallest node memory, node count and largest node."""

    mem_mb: int
    nodes: int
    cpus: int
    default: bool = False


def _number(text: str) -> int:
    digits = text.strip().rstrip("+")
    return int(digits) if digits.isdigit() else 0


def parse_sinfo(out: str) -> dict[str, Partition]:
    """Partition name -> :class:`Partition`, from ``sinfo -h -o SINFO_FORMAT``."""
    parts: dict[str, Partition] = {}
    for line in out.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 4 or not fields[0]:
            continue
        name, mem, nodes, cpus = fields
        default = name.endswith("*")
        name = name.rstrip("*")
        seen = parts.get(name)
        if seen is None:
            parts[name] = Partition(
                _number(mem), _number(nodes), _number(cpus), default
            )
        else:
            seen.mem_mb = min(seen.mem_mb, _number(mem))
            seen.nodes += _number(nodes)
            seen.cpus = max(seen.cpus, _number(cpus))
            seen.default = seen.default or default
    return parts


def default_partition(parts: dict[str, Partition]) -> str | None:
    """The partition a job without ``--partition`` goes to (None: none marked)."""
    return next((name for name, p in parts.items() if p.default), None)


def check_fits(app: AppDef, name: str, part: Partition) -> None:
    """Raise SpecError when ``app`` can never run in partition ``name``.

    Example:
        >>> from asyncsched.specs import Role
        >>> role = Role("w", image="/", entrypoint="true", num_replicas=5)
        >>> check_fits(AppDef("a", roles=[role]), "debug", Partition(2000, 4, 2))
        Traceback (most recent call last):
        ...
        asyncsched.errors.SpecError: roles[0].num_replicas: ...
    """
    total = sum(max(role.num_replicas, 0) for role in app.roles)
    if total > part.nodes:
        index = max(
            (i for i, role in enumerate(app.roles) if role.num_replicas > 0),
            default=0,
        )
        raise SpecError(
            f"roles[{index}].num_replicas",
            f"the app has {total} replicas in all but partition {name!r} has"
            f" {part.nodes} node(s); each replica is one heterogeneous-job"
            " component and Slurm gives each component a node of its own, so the"
            " job would wait forever (use at most"
            f" {part.nodes} replicas, or a larger partition)",
        )
    if part.cpus <= 0:
        return  # sinfo did not say
    for index, role in enumerate(app.roles):
        cpu = role.resource.cpu
        wanted = int(cpu) if cpu >= 1 else 1
        if cpu > 0 and role.num_replicas > 0 and wanted > part.cpus:
            raise SpecError(
                f"roles[{index}].resource.cpu",
                f"{wanted} CPUs per replica, but the nodes of partition {name!r}"
                f" have at most {part.cpus}; the job would wait forever",
            )
