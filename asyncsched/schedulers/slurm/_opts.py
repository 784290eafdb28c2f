"""The Slurm backend's run options: TorchX's keys, plus ``nomem`` and ``fail_fast``."""

from __future__ import annotations

from typing import TypedDict

from asyncsched.schedulers.shared.run_options import add_fail_fast
from asyncsched.specs import runopts

__all__ = ("SlurmOpts", "slurm_run_opts")

#: Run options of :class:`SlurmScheduler` (after resolution); TorchX's keys,
#: hence the functional form for ``mail-user`` and ``mail-type``.
SlurmOpts = TypedDict(
    "SlurmOpts",
    {
        "partition": str | None,
        "time": str | None,
        "comment": str | None,
        "constraint": str | None,
        "mail-user": str | None,
        "mail-type": str | None,
        "job_dir": str | None,
        "qos": str | None,
        "nomem": bool,
        "fail_fast": bool,
    },
    total=False,
)


_STR_OPTIONS = {  # run option -> help, in the order run_opts() lists them
    "partition": "the partition to run the job in",
    "time": "maximum run time: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS",
    "comment": "comment to set on the job",
    "constraint": "node features the job requires",
    "mail-user": "user to mail on job events",
    "mail-type": "events to mail on (e.g. END,FAIL)",
    "job_dir": "directory (must not exist yet) to write the script to and run the"
    " job in; its logs go there. Default: the current directory",
    "qos": "quality of service to assign to the job",
}


def slurm_run_opts() -> runopts:
    """The run options a :class:`SlurmScheduler` accepts."""
    opts = runopts()
    for name, text in _STR_OPTIONS.items():
        opts.add(name, type_=str, help=text)
    opts.add(
        "nomem",
        type_=bool,
        default=False,
        help="do not request memory (--mem), e.g. on clusters that report none",
    )
    add_fail_fast(opts)
    return opts
