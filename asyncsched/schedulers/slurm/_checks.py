"""What may reach the ``sbatch`` script: checks of run options and role fields.

The script is read twice. ``sbatch`` takes options from the leading ``#SBATCH``
lines: it splits them at whitespace, honours ``'``/``"`` quotes and ``\\``
escapes, drops everything after an unquoted ``#``, stops at the first line that
is not a comment, and (in some releases) reads ``hetjob``/``packjob`` anywhere on
a line as a component separator. ``bash`` then runs the rest. So:

* no run option may hold a control character or a line break (it would end its
  line, and what follows would become a command or a directive);
* options that Slurm reads as one word (``partition``, ``qos``, ``constraint``,
  ``mail-user``, ``mail-type``, ``time``) may hold no whitespace; those on the
  ``#SBATCH`` lines also no quote, backslash or ``#``, nor ``hetjob``/``packjob``;
* free text (``comment``, ``job_dir``) is shell-quoted where the script shows it;
* role fields are shell-quoted; what quoting cannot protect is refused: an
  environment name that is not a shell identifier, an argument or entrypoint
  that is a lone ``:`` (``srun`` starts a new component there), text that
  cannot be written as UTF-8.

Every problem is an :class:`InvalidRunConfigException` naming the option or a
:class:`SpecError` naming the field, raised before any command runs.

Example:
    >>> check_run_options({"qos": "normal", "comment": "it's $fine; really"})
    >>> check_run_options({"qos": "normal --uid=0"})
    Traceback (most recent call last):
    ...
    asyncsched.errors.InvalidRunConfigException: qos='normal --uid=0': ...
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

from asyncsched.errors import InvalidRunConfigException, SpecError
from asyncsched.schedulers.shared.identity import RANK0_ENV
from asyncsched.specs import AppDef, CfgVal, Role, macros

__all__ = [
    "SBATCH_LINE_OPTS",
    "check_roles",
    "check_run_options",
    "check_time",
]

#: run options written on the ``#SBATCH`` lines (read by sbatch's own parser)
SBATCH_LINE_OPTS = ("partition", "time", "constraint", "qos")
#: words ``sbatch`` reads as a heterogeneous-component separator on an ``#SBATCH`` line
_SEPARATORS = ("hetjob", "packjob")
#: characters sbatch's ``#SBATCH`` parser treats specially
_SBATCH_SPECIAL = "'\"\\#"
#: Unicode categories that end a line somewhere: controls, line and paragraph separators
_BREAKING = frozenset({"Cc", "Zl", "Zp"})

# Slurm's time formats: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
_TIME = re.compile(
    r"(?:\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+|\d+-\d+:\d{1,2}"
    r"|\d+-\d+:\d{1,2}:\d{1,2}|infinite|unlimited|-1)",
    re.IGNORECASE,
)
# comma-separated event names (NONE, BEGIN, END, FAIL, TIME_LIMIT_90, ...)
_MAIL_TYPE = re.compile(r"[A-Za-z0-9_]+(?:,[A-Za-z0-9_]+)*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


_NAMES = {
    "\n": "a newline",
    "\r": "a carriage return",
    "\0": "a NUL byte",
    "\t": "a tab",
    "\u2028": "a line separator",
    "\u2029": "a paragraph separator",
}


def _describe(char: str) -> str:
    return _NAMES.get(char, f"the control character U+{ord(char):04X}")


def _first_breaking(value: str) -> str | None:
    for char in value:
        if unicodedata.category(char) in _BREAKING:
            return char
    return None


def _unencodable(value: str) -> bool:
    try:
        value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return True
    return False


def _option_error(key: str, value: str, why: str) -> InvalidRunConfigException:
    return InvalidRunConfigException(f"{key}={value!r}: {why}", key, value)


def check_time(value: str) -> None:
    """Raise InvalidRunConfigException unless ``value`` is a Slurm time limit.

    Example:
        >>> check_time("1-02:30:00")
    """
    if not _TIME.fullmatch(value):
        raise _option_error(
            "time",
            value,
            "not a Slurm time limit; use minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM"
            " or D-HH:MM:SS, without spaces",
        )


def _check_option(key: str, value: str) -> None:
    if key == "time":
        check_time(value)
        return
    if value == "" and key != "comment":
        raise _option_error(key, value, "must not be empty")
    bad = _first_breaking(value)
    if bad is not None:
        raise _option_error(
            key,
            value,
            f"contains {_describe(bad)} ({bad!r}); control characters and line"
            " breaks would break the lines of the batch script",
        )
    if _unencodable(value):
        raise _option_error(key, value, "cannot be written as UTF-8")
    if key in ("comment", "job_dir"):
        return  # free text: shell-quoted where the script shows it
    if key == "mail-type":
        if not _MAIL_TYPE.fullmatch(value):
            raise _option_error(
                key,
                value,
                "must be a comma-separated list of event names such as END,FAIL",
            )
        return
    space = next((c for c in value if c.isspace()), None)
    if space is not None:
        raise _option_error(
            key,
            value,
            f"contains whitespace ({space!r}); Slurm reads {key} as one word, and"
            " a space would start another sbatch option",
        )
    if key not in SBATCH_LINE_OPTS:
        return
    special = next((c for c in value if c in _SBATCH_SPECIAL), None)
    if special is not None:
        raise _option_error(
            key,
            value,
            f"contains {special!r}, which sbatch's #SBATCH parser reads as a quote,"
            " an escape or the start of a comment",
        )
    lowered = value.lower()
    word = next((w for w in _SEPARATORS if w in lowered), None)
    if word is not None:
        raise _option_error(
            key,
            value,
            f"contains {word!r}, which sbatch may read as a heterogeneous job separator",
        )


def check_run_options(cfg: Mapping[str, CfgVal]) -> None:
    """Raise InvalidRunConfigException for a run option that is unsafe in the script.

    Checks every string option of the Slurm scheduler that reaches the script or
    the ``sbatch`` command line (``nomem`` is a bool, type-checked elsewhere).

    Example:
        >>> check_run_options({"constraint": "[rack1|rack2]&gpu*2", "time": "10:00"})
    """
    for key in (*SBATCH_LINE_OPTS, "comment", "mail-user", "mail-type", "job_dir"):
        value = cfg.get(key)
        if value is not None:
            _check_option(key, str(value))


def check_roles(app: AppDef) -> None:
    """Raise SpecError for a role field the batch script cannot carry intact.

    Checks the fields after macro substitution (what the script and the
    environment files would hold), once per role whatever its replica count.

    Example:
        >>> from asyncsched.specs import Role
        >>> check_roles(AppDef("a", roles=[Role("w", image="/", args=[":"])]))
        Traceback (most recent call last):
        ...
        asyncsched.errors.SpecError: roles[0].args[0]: ...
    """
    for index, role in enumerate(app.roles):
        where = f"roles[{index}]"
        lowered = role.name.lower()
        word = next((w for w in _SEPARATORS if w in lowered), None)
        if word is not None:
            raise SpecError(
                f"{where}.name",
                f"{role.name!r} contains {word!r}, which sbatch may read as a"
                " heterogeneous job separator on the role's #SBATCH line",
            )
        for key in role.env:
            if not _ENV_NAME.fullmatch(key):
                raise SpecError(
                    f"{where}.env[{key!r}]",
                    "an environment variable name must be a shell identifier"
                    " (letters, digits and '_', not starting with a digit)",
                )
    for index, role in enumerate(app.roles):
        if role.num_replicas < 1:
            continue
        _check_replica_fields(index, role)


def _check_replica_fields(index: int, role: Role) -> None:
    """Check the fields of ``role`` as the script would hold them.

    One replica stands for all: the replicas' fields differ only where
    ``${replica_id}`` became digits, which can neither make nor unmake a lone
    ``:`` or text that is not UTF-8 (so the check costs the same for 1 or 10^6
    replicas).
    """
    where = f"roles[{index}]"
    values = macros.Values(
        img_root=role.image, app_id="${app_id}", replica_id="0", rank0_env=RANK0_ENV
    )
    if role.entrypoint == ":":
        raise SpecError(
            f"{where}.entrypoint",
            "a lone ':' is where srun starts another heterogeneous component;"
            " use a path",
        )
    args = [values.substitute(a) for a in role.args]
    for i, arg in enumerate(args):
        if arg == ":":
            raise SpecError(
                f"{where}.args[{i}]",
                "a lone ':' is where srun starts another heterogeneous"
                " component; it cannot be passed as an argument on Slurm"
                " (e.g. pass it through a shell: sh -c '...')",
            )
    fields = [(f"{where}.entrypoint", role.entrypoint)]
    fields += [(f"{where}.args[{i}]", a) for i, a in enumerate(args)]
    fields += [
        (f"{where}.env[{k!r}]", values.substitute(v)) for k, v in role.env.items()
    ]
    for name, value in fields:
        if _unencodable(value):
            raise SpecError(name, f"cannot be written as UTF-8: {value!r}")
