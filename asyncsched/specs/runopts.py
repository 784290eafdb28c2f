"""Scheduler run configuration: option declarations, parsing and resolution."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias, get_args, get_origin

from asyncsched.errors import (
    ArgumentTypeError,
    AsyncschedWarning,
    InvalidArgumentError,
    InvalidRunConfigException,
)

__all__ = ["CfgVal", "choice", "get_type_name", "runopt", "runopts", "to_dict"]

CfgVal: TypeAlias = str | int | float | bool | list[str] | dict[str, str] | None
"""The value types a run option may take."""

_DELIMITERS = (",", ";")


def choice(
    cfg: Mapping[str, CfgVal], key: str, choices: Collection[str], default: str
) -> str:
    """The value of the string option ``key`` (``default`` if unset), one of ``choices``.

    Raises:
        InvalidRunConfigException: the value is not one of ``choices``.

    Example:
        >>> choice({"job_api": "indexed"}, "job_api", ("volcano", "indexed"), "volcano")
        'indexed'
    """
    value = str(cfg.get(key) or default)
    if value not in choices:
        raise InvalidRunConfigException(
            f"{key} must be one of {list(choices)}, got {value!r}", key, dict(cfg)
        )
    return value


def get_type_name(tp: object) -> str:
    """Name of ``tp`` for messages: ``__name__`` of plain classes, else ``str(tp)``.

    Example:
        >>> get_type_name(int), get_type_name(list[str])
        ('int', 'list[str]')
    """
    if isinstance(tp, type) and tp.__module__ != "typing":
        return tp.__name__
    return str(tp)


def _split_items(value: str) -> list[str]:
    return [item for item in value.replace(";", ",").split(",") if item]


@dataclass
class runopt:
    """One declared run option.

    Args:
        default: Value used when the option is not given (may be None).
        opt_type: Expected type, e.g. ``str``, ``int`` or ``list[str]``.
        is_required: Whether the option must be given.
        help: One-line help text.
    """

    default: CfgVal
    opt_type: type[CfgVal]
    is_required: bool
    help: str

    @property
    def is_type_list_of_str(self) -> bool:
        """True when the option is a ``list[str]`` (or ``typing.List[str]``)."""
        return get_origin(self.opt_type) is list and get_args(self.opt_type) == (str,)

    @property
    def is_type_dict_of_str(self) -> bool:
        """True when the option is a ``dict[str, str]`` (or ``typing.Dict[str, str]``)."""
        str_to_str = (str, str)
        return (
            get_origin(self.opt_type) is dict and get_args(self.opt_type) == str_to_str
        )

    def cast_to_type(self, value: str) -> CfgVal:
        """Convert a string (e.g. from the command line) to this option's type.

        bool: ``true`` or ``false`` in any case; anything else is an error
        (TorchX reads anything but "true" as False). ``list[str]``:
        items split on ``,`` or ``;``, empty items dropped. ``dict[str, str]``:
        ``k:v`` items split on ``,`` or ``;``, each at its first ``:``. Anything
        else is passed to the type's constructor.

        Raises:
            InvalidArgumentError: (a ValueError) the option has no type, the
                constructor rejects the value, or a dict item has no ``:``.
        """
        if self.opt_type is None:
            raise InvalidArgumentError("run option has no type to cast to")
        if self.opt_type is bool:
            word = value.strip().lower()
            if word not in _BOOL_WORDS:
                raise InvalidArgumentError(
                    f"{value!r} is not a boolean; use one of {sorted(_BOOL_WORDS)}"
                )
            return _BOOL_WORDS[word]
        if self.is_type_list_of_str:
            return _split_items(value)
        if self.is_type_dict_of_str:
            result: dict[str, str] = {}
            for item in _split_items(value):
                key, sep, val = item.partition(":")
                if not sep:
                    raise InvalidArgumentError(f"{item!r} is not a `key:value` item")
                result[key] = val
            return result
        constructor: Any = self.opt_type
        try:
            cast: CfgVal = constructor(value)
        except (TypeError, ValueError) as exc:
            name = getattr(self.opt_type, "__name__", self.opt_type)
            raise InvalidArgumentError(
                f"cannot convert {value!r} to {name}: {exc}"
            ) from None
        return cast


_BOOL_WORDS = {"true": True, "false": False}


class runopts:
    """Ordered registry of the run options a scheduler accepts.

    Example:
        >>> opts = runopts()
        >>> opts.add("cluster", type_=str, help="where to run", required=True)
        >>> opts.add("priority", type_=int, help="job priority", default=0)
        >>> opts.resolve({"cluster": "east"})
        {'cluster': 'east', 'priority': 0}
        >>> opts.cfg_from_str("cluster=west,priority=3")
        {'cluster': 'west', 'priority': 3}
    """

    def __init__(self) -> None:
        self._opts: dict[str, runopt] = {}

    def __iter__(self) -> Iterator[tuple[str, runopt]]:
        return iter(self._opts.items())

    def __len__(self) -> int:
        return len(self._opts)

    def get(self, name: str) -> runopt | None:
        """The option registered as ``name``, or None."""
        return self._opts.get(name)

    def add(
        self,
        cfg_key: str,
        type_: type[CfgVal],
        help: str,
        default: CfgVal = None,
        required: bool = False,
    ) -> None:
        """Declare (or replace) an option.

        Raises:
            InvalidArgumentError: ``required`` is set together with a non-None
                ``default``.
            ArgumentTypeError: ``default`` is not of type ``type_``.
        """
        if required and default is not None:
            raise InvalidArgumentError(
                f"Required option: {cfg_key} must not specify default value."
                f" Given: {default}"
            )
        if default is not None and not runopts.is_type(default, type_):
            raise ArgumentTypeError(
                f"Option: {cfg_key}, must be of type: {type_}."
                f" Given: {default} ({type(default).__name__})"
            )
        self._opts[cfg_key] = runopt(default, type_, required, help)

    def update(self, other: runopts) -> None:
        """Merge ``other`` into this registry; its options win on conflicts."""
        self._opts.update(other._opts)

    @staticmethod
    def is_type(obj: CfgVal, tp: type[CfgVal]) -> bool:
        """``isinstance`` that also accepts ``list[str]``/``dict[str, str]`` generics.

        For a generic, any list of strings and any dict of strings to strings
        match, whichever generic was asked for; None never matches a generic.
        """
        try:
            return isinstance(obj, tp)
        except TypeError:
            if isinstance(obj, list):
                return all(isinstance(e, str) for e in obj)
            if isinstance(obj, dict):
                entries: Iterable[tuple[object, object]] = obj.items()
                return all(
                    isinstance(k, str) and isinstance(v, str) for k, v in entries
                )
            return False

    def resolve(
        self, cfg: Mapping[str, CfgVal], strict: bool = False
    ) -> dict[str, CfgVal]:
        """Check ``cfg`` against the declared options and fill in defaults.

        The input is never modified. Unknown keys are passed through unless
        ``strict`` is true, in which case they are rejected.

        Raises:
            InvalidRunConfigException: ``cfg`` is not a mapping with string
                keys, an unknown key (strict only), a required option missing
                or None, or a value of the wrong type.
        """
        if not isinstance(cfg, Mapping):
            raise InvalidRunConfigException(
                "Run options (cfg) must be a mapping of option name to value,"
                f" e.g. {{'log_dir': '/tmp/logs'}}, got {type(cfg).__name__}",
                "cfg",
                cfg,
            )
        for key in cfg:
            if not isinstance(key, str):
                raise InvalidRunConfigException(
                    f"Run option names must be strings, got {key!r}", str(key), cfg
                )
        if strict:
            for key in cfg:
                if key not in self._opts:
                    raise InvalidRunConfigException(self._unknown_reason(key), key, cfg)
        resolved: dict[str, CfgVal] = dict(cfg)
        for key, opt in self._opts.items():
            value = resolved.get(key)
            if value is None:
                if opt.is_required:
                    raise InvalidRunConfigException(
                        f"Required run option: {key}, must be provided and not `None`",
                        key,
                        cfg,
                    )
                resolved[key] = opt.default
            elif not runopts.is_type(value, opt.opt_type):
                raise InvalidRunConfigException(
                    f"Run option: {key}, must be of type: {get_type_name(opt.opt_type)},"
                    f" but was: {value} ({type(value).__name__})",
                    key,
                    cfg,
                )
        return resolved

    def _unknown_reason(self, key: str) -> str:
        valid = list(self._opts)
        reason = f"Unknown run option: {key}, valid options are: {valid}"
        import difflib  # only for this error's hint

        close = difflib.get_close_matches(key, valid, n=1)
        if close:
            reason += f" (did you mean `{close[0]}`?)"
        return reason

    def cfg_from_str(self, cfg_str: str) -> dict[str, CfgVal]:
        """Parse a ``k1=v1,k2=v2`` literal (see :func:`to_dict`) into typed values.

        Unknown keys are dropped with a warning. Defaults and required options are
        not applied: use ``opts.resolve(opts.cfg_from_str(s))`` for that.

        Raises:
            InvalidRunConfigException: the literal cannot be parsed, or a value
                cannot be converted to its option's type.
        """
        cfg: dict[str, CfgVal] = {}
        for key, value in to_dict(cfg_str).items():
            opt = self.get(key)
            if opt is None:
                warnings.warn(
                    f"ignoring unknown run option `{key}`;"
                    f" valid options are: {list(self._opts)}",
                    AsyncschedWarning,
                    stacklevel=2,
                )
                continue
            try:
                cfg[key] = opt.cast_to_type(value)
            except InvalidArgumentError as exc:
                raise InvalidRunConfigException(
                    f"Run option: {key}, {exc}", key, cfg_str
                ) from None
        return cfg

    def cfg_from_json_repr(self, json_repr: str) -> dict[str, CfgVal]:
        """Parse a JSON object into a cfg, keeping only declared options.

        ``list[str]`` elements and ``dict[str, str]`` keys and values are coerced
        to ``str``; other values (and null) are kept as they are.
        """
        loaded: dict[str, Any] = json.loads(json_repr)
        cfg: dict[str, CfgVal] = {}
        for key, value in loaded.items():
            opt = self.get(key)
            if opt is None:
                continue
            if value is not None and opt.is_type_list_of_str:
                cfg[key] = [str(v) for v in value]
            elif value is not None and opt.is_type_dict_of_str:
                cfg[key] = {str(k): str(v) for k, v in value.items()}
            else:
                cfg[key] = value
        return cfg

    def __repr__(self) -> str:
        required = [(k, o) for k, o in self._opts.items() if o.is_required]
        optional = [(k, o) for k, o in self._opts.items() if not o.is_required]
        usage = ",".join(
            f"{k}={k.upper()}" if o.is_required else f"[{k}={k.upper()}]"
            for k, o in required + optional
        )
        out = f"    usage:\n        {usage}"
        for title, section in (("required", required), ("optional", optional)):
            if not section:
                continue
            out += f"\n\n    {title} arguments:"
            for key, opt in section:
                default = "" if opt.is_required else f", {opt.default}"
                type_name = get_type_name(opt.opt_type)
                out += f"\n        {key}={key.upper()} ({type_name}{default})"
                out += f"\n            {opt.help}"
        return out


# -- the cfg literal parser ---------------------------------------------------

# a whole value in quotes: after `=`, `,`, `;` (or at the start), before `,`, `;` or the end
_QUOTED = re.compile(r"(?:(?<=[=,;])|^)\s*('[^']*'|\"[^\"]*\")\s*(?=[,;]|$)")
_PLACEHOLDER = re.compile(r"\x00(\d+)\x00")


def to_dict(arg: str) -> dict[str, str]:
    """Parse a ``key=value`` literal into a dict of raw string values.

    Pairs are separated by ``,`` or ``;``. Because values may themselves be lists
    using the same delimiters, the *last* delimiter before a key separates the
    pairs, so ``FOO=v1,v2,BAR=v3`` gives ``{"FOO": "v1,v2", "BAR": "v3"}``.
    Values are returned as written (trailing delimiters included); casting is up
    to the caller. A value in single or double quotes may contain ``=``, ``,``
    and ``;``; ``''`` and ``""`` are the empty string. An unquoted ``=`` inside a
    value is not supported.

    Raises:
        InvalidRunConfigException: (a ValueError) ``arg`` is not empty but has
            no ``key=value`` pair, or a pair cannot be split (e.g. ``FOO=;BAR=v1``).
    """
    if not arg:
        return {}
    quoted: list[str] = []

    def hide(match: re.Match[str]) -> str:
        quoted.append(match.group(1)[1:-1])
        return f"\x00{len(quoted) - 1}\x00"

    def restore(text: str) -> str:
        return _PLACEHOLDER.sub(lambda m: quoted[int(m.group(1))], text)

    chunks = [c.strip() for c in _QUOTED.sub(hide, arg).split("=") if c.strip()]
    if len(chunks) < 2:
        raise InvalidRunConfigException(
            f"`{arg}` does not have at least one `key=value` pair", "", arg
        )

    result: dict[str, str] = {}
    key = chunks[0]
    # chunks look like: KEY1, "val1,KEY2", "val2,KEY3", ..., "valN"
    for chunk in chunks[1:-1]:
        cut = max(chunk.rfind(d) for d in _DELIMITERS)
        if cut <= 0 or cut == len(chunk) - 1:
            raise InvalidRunConfigException(
                f"`{restore(chunk)}` cannot be split into `value<delim>key`"
                f" with delimiters {list(_DELIMITERS)}",
                "",
                arg,
            )
        result[restore(key)] = restore(chunk[:cut].strip())
        key = chunk[cut + 1 :].strip()
    result[restore(key)] = restore(chunks[-1])
    return result
