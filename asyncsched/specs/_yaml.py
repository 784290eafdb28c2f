"""Safe YAML for app files: aliases refused, so a small file stays small.

``yaml.safe_load`` expands aliases by reference: nine nested levels of
``[*a, *a, ...]`` make a 361-byte file a structure of a billion strings that
later code (records, JSON output, macro substitution) walks or writes out.
App files have no use for aliases (anchors alone are harmless), so
:func:`load_yaml` refuses the first alias it meets, before building
anything from it.

Example:
    >>> load_yaml("a: [1, 2]")
    {'a': [1, 2]}
    >>> try:
    ...     load_yaml("a: &x [1]\\nb: *x")
    ... except YamlAliasError as exc:
    ...     print(exc)
    line 2: YAML aliases (*x) are not accepted; write the value out
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["YamlAliasError", "load_yaml"]


class YamlAliasError(yaml.YAMLError):
    """The document uses an alias (``*name``)."""


class _NoAliasLoader(yaml.SafeLoader):
    """``SafeLoader`` whose composer stops at the first alias event."""

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event: yaml.AliasEvent = self.peek_event()  # type: ignore[no-untyped-call]
            line = event.start_mark.line + 1 if event.start_mark else "?"
            raise YamlAliasError(
                f"line {line}: YAML aliases (*{event.anchor}) are not"
                " accepted; write the value out"
            )
        return super().compose_node(parent, index)


def load_yaml(text: str) -> Any:
    """Parse one YAML document with the safe types and no aliases.

    Raises:
        YamlAliasError: the document uses an alias.
        yaml.YAMLError: it is not valid YAML.
    """
    return yaml.load(text, Loader=_NoAliasLoader)
