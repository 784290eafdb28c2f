"""A tiny busybox-like interpreter: what a fake pod's container "does".

The container's ``command`` + ``args`` (after the kubelet's ``$(VAR)``
expansion, see :func:`kubelet_expand`) run as:

* ``sh -c 'SCRIPT' [$0 [$1 ...]]`` (also ``/bin/sh``, ``bash``, ``ash``):
  a script of simple commands joined by ``;``, newlines, ``&&`` and ``||``;
  words may be quoted (``'...'``, ``"..."``, backslash) and use ``$VAR``,
  ``${VAR}``, ``$?``, ``$0``-``$9``, ``$#``, ``$$``; ``#`` starts a comment;
  assignments ``A=b`` and ``export A=b``; redirections ``>&2``, ``1>&2``,
  ``2>&1``, ``2>/dev/null`` are accepted (stdout and stderr share the log),
  ``>/dev/null`` discards the command's output;
* anything else: exec form, one command with no shell expansion; an unknown
  program fails to start (:class:`StartError`, like the runtime's
  "executable file not found").

Built-in commands: ``echo [-n] [-e]``, ``printf FMT ARGS`` (``%s %d %i %%``
and ``\\n \\t \\\\`` escapes), ``exit [N]``, ``sleep S``, ``true``, ``false``,
``:``, ``env``/``printenv [VAR]``, ``hostname``, ``seq [FIRST] LAST``,
``export``, ``test A = B`` (also ``!=``, ``-n S``, ``-z S``). An unknown
command in a script prints ``sh: X: not found`` and has status 127. No
pipes, loops, ``if`` or subshells (``test ... && exit 3`` does).

Example::

    out: list[str] = []
    async def write(text: str) -> None: out.append(text)
    code = await Shell({"RANK": "1"}, write).run(["sh", "-c", "echo rank $RANK; exit 3"])
    # code == 3, out == ["rank 1\\n"]
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

Writer = Callable[[str], Awaitable[None]]
_SHELLS = {"sh", "bash", "ash", "dash"}
_OPS = ("&&", "||", ";", "\n", "|", "&")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class StartError(Exception):
    """The exec-form program does not exist (the container cannot start)."""


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


def kubelet_expand(text: str, env: Mapping[str, str]) -> str:
    """The kubelet's ``$(VAR)`` expansion of command, args and env values.

    ``$(NAME)`` becomes the value when NAME is defined, else stays as is;
    ``$$`` escapes a ``$``.
    """
    out: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("$(", i):
            end = text.find(")", i + 2)
            name = text[i + 2 : end] if end != -1 else ""
            if end != -1 and name in env:
                out.append(env[name])
                i = end + 1
            else:
                out.append(text[i : end + 1] if end != -1 else text[i:])
                i = end + 1 if end != -1 else len(text)
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


# A word is a list of (text, kind): kind "lit" (literal) or "var" (to expand),
# and "q" marks parts that came from inside double quotes (no word removal).
_Part = tuple[str, str, bool]


@dataclass
class _Command:
    words: list[list[_Part]] = field(default_factory=list)
    discard: bool = False


def _tokenize(script: str) -> list[_Command | str]:
    """Commands and connector operators, in order."""
    items: list[_Command | str] = []
    cmd = _Command()
    word: list[_Part] | None = None
    i, n = 0, len(script)

    def end_word() -> None:
        nonlocal word
        if word is not None:
            cmd.words.append(word)
            word = None

    def end_command(op: str) -> None:
        nonlocal cmd
        end_word()
        if cmd.words or cmd.discard:
            items.append(cmd)
        cmd = _Command()
        items.append(op)

    def read_var(j: int, quoted: bool) -> tuple[_Part, int]:
        # script[j] == "$"
        if j + 1 < n and script[j + 1] == "{":
            end = script.find("}", j + 2)
            if end == -1:
                raise SyntaxError("bad substitution")
            return (script[j + 2 : end], "var", quoted), end + 1
        if j + 1 < n and script[j + 1] in "?#$@*0123456789":
            return (script[j + 1], "var", quoted), j + 2
        m = _NAME.match(script, j + 1)
        if m:
            return (m.group(), "var", quoted), m.end()
        return ("$", "lit", quoted), j + 1

    while i < n:
        ch = script[i]
        if ch in " \t":
            end_word()
            i += 1
        elif ch == "#" and word is None:
            while i < n and script[i] != "\n":
                i += 1
        elif ch == "\\" and i + 1 < n:
            if script[i + 1] == "\n":
                i += 2
                continue
            word = (word or []) + [(script[i + 1], "lit", True)]
            i += 2
        elif ch == "'":
            end = script.find("'", i + 1)
            if end == -1:
                raise SyntaxError("unterminated quoted string")
            word = (word or []) + [(script[i + 1 : end], "lit", True)]
            i = end + 1
        elif ch == '"':
            word = word or []
            word.append(("", "lit", True))
            i += 1
            while i < n and script[i] != '"':
                if script[i] == "\\" and i + 1 < n and script[i + 1] in '$`"\\\n':
                    word.append((script[i + 1], "lit", True))
                    i += 2
                elif script[i] == "$":
                    part, i = read_var(i, True)
                    word.append(part)
                else:
                    word.append((script[i], "lit", True))
                    i += 1
            if i >= n:
                raise SyntaxError("unterminated quoted string")
            i += 1
        elif ch == "$":
            part, i = read_var(i, False)
            word = (word or []) + [part]
        elif word is None and (
            m := re.match(r"(\d?)>(>?)\s*(&\d|[^\s;&|]+)", script[i:])
        ):
            if m.group(1) in ("", "1") and m.group(3) == "/dev/null":
                cmd.discard = True
            i += m.end()
        elif ch in "&|;\n":
            op = script[i : i + 2] if script[i : i + 2] in ("&&", "||") else ch
            end_command(op)
            i += len(op)
        else:
            word = (word or []) + [(ch, "lit", False)]
            i += 1
    end_word()
    if cmd.words:
        items.append(cmd)
    return items


_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", "r": "\r", "a": "\a", "0": "\0"}


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), text)


def _printf(fmt: str, args: list[str]) -> str:
    out: list[str] = []
    fmt = _unescape(fmt)
    specs = len(re.findall(r"%[sdi]", fmt))
    while True:
        used = args[:specs]
        args = args[specs:]
        it = iter(used)

        def sub(m: re.Match[str], it: object = it) -> str:
            if m.group() == "%%":
                return "%"
            value = next(it, "")  # type: ignore[call-overload]
            if m.group() in ("%d", "%i"):
                try:
                    return str(int(value or 0))
                except ValueError:
                    return "0"
            return str(value)

        out.append(re.sub(r"%%|%[sdi]", sub, fmt))
        if not args or specs == 0:
            return "".join(out)


@dataclass
class Shell:
    """Runs a container's argv; output goes to ``write``; returns the exit code."""

    env: dict[str, str]
    write: Writer
    hostname: str = "localhost"
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    status: int = 0
    positional: list[str] = field(default_factory=list)

    async def run(self, argv: list[str]) -> int:
        """Run ``argv`` (shell form or exec form)."""
        if len(argv) >= 3 and os.path.basename(argv[0]) in _SHELLS and argv[1] == "-c":
            self.positional = argv[3:] or [argv[0]]
            try:
                items = _tokenize(argv[2])
            except SyntaxError as exc:
                await self.write(f"sh: syntax error: {exc}\n")
                return 2
            try:
                return await self._run_items(items)
            except _Exit as exc:
                return exc.code
        if not argv:
            raise StartError("no command specified")
        if not self._builtin(os.path.basename(argv[0])):
            raise StartError(f'exec: "{argv[0]}": executable file not found in $PATH')
        try:
            return await self._call([os.path.basename(argv[0]), *argv[1:]], False)
        except _Exit as exc:
            return exc.code

    async def _run_items(self, items: list[_Command | str]) -> int:
        skip = False
        for item in items:
            if isinstance(item, str):
                if item == "&&":
                    skip = self.status != 0
                elif item == "||":
                    skip = self.status == 0
                elif item == "|":
                    await self.write("sh: pipes are not supported by the fake shell\n")
                    self.status = 2
                    skip = False
                else:
                    skip = False
                continue
            if skip:
                continue
            argv = self._expand(item.words)
            self.status = await self._call(argv, item.discard) if argv else self.status
        return self.status

    def _lookup(self, name: str) -> str:
        if name == "?":
            return str(self.status)
        if name == "#":
            return str(max(len(self.positional) - 1, 0))
        if name == "$":
            return "1"
        if name in ("@", "*"):
            return " ".join(self.positional[1:])
        if name.isdigit():
            idx = int(name)
            return self.positional[idx] if idx < len(self.positional) else ""
        return self.env.get(name, "")

    def _expand(self, words: list[list[_Part]]) -> list[str]:
        argv: list[str] = []
        for word in words:
            text = "".join(
                self._lookup(t) if kind == "var" else t for t, kind, _ in word
            )
            if text or any(quoted or kind == "lit" for _, kind, quoted in word):
                argv.append(text)
        return argv

    def _builtin(self, name: str) -> bool:
        return name in {
            "echo", "printf", "exit", "sleep", "true", "false", ":", "env",
            "printenv", "hostname", "seq", "export", "test",
        }  # fmt: skip

    async def _call(self, argv: list[str], discard: bool) -> int:
        assignments = 0
        while assignments < len(argv) and re.match(
            r"^[A-Za-z_]\w*=", argv[assignments]
        ):
            assignments += 1
        if assignments == len(argv):
            for item in argv:
                key, _, value = item.partition("=")
                self.env[key] = value
            return 0
        name, args = argv[assignments], argv[assignments + 1 :]
        write = self.write

        async def out(text: str) -> None:
            if not discard:
                await write(text)

        if name == "echo":
            newline, escapes = "\n", False
            while args and args[0] in ("-n", "-e", "-ne", "-en", "-E"):
                newline = "" if "n" in args[0] else newline
                escapes = escapes or "e" in args[0]
                args = args[1:]
            text = " ".join(args)
            await out((_unescape(text) if escapes else text) + newline)
            return 0
        if name == "printf":
            if not args:
                await self.write("printf: usage: printf FORMAT [ARGUMENT]...\n")
                return 2
            await out(_printf(args[0], args[1:]))
            return 0
        if name == "exit":
            raise _Exit(int(args[0]) & 0xFF if args else self.status)
        if name == "sleep":
            try:
                seconds = float(args[0].rstrip("s")) if args else 0.0
            except ValueError:
                await self.write(f"sleep: invalid number '{args[0]}'\n")
                return 1
            await self.sleep(seconds)
            return 0
        if name in ("true", ":"):
            return 0
        if name == "false":
            return 1
        if name in ("env", "printenv"):
            if name == "printenv" and args:
                if args[0] not in self.env:
                    return 1
                await out(self.env[args[0]] + "\n")
                return 0
            await out("".join(f"{k}={v}\n" for k, v in sorted(self.env.items())))
            return 0
        if name == "hostname":
            await out(self.hostname + "\n")
            return 0
        if name == "seq":
            try:
                nums = [int(a) for a in args]
            except ValueError:
                return 1
            first, last = (
                (nums[0], nums[1]) if len(nums) >= 2 else (1, nums[0] if nums else 0)
            )
            await out("".join(f"{i}\n" for i in range(first, last + 1)))
            return 0
        if name == "test":
            return _test(args)
        if name == "export":
            for item in args:
                key, eq, value = item.partition("=")
                if eq:
                    self.env[key] = value
            return 0
        await self.write(f"sh: {name}: not found\n")
        return 127


def _test(args: list[str]) -> int:
    """``test``: string (in)equality and emptiness; 0 true, 1 false, 2 misuse."""
    if len(args) == 3 and args[1] in ("=", "!="):
        return int((args[0] == args[2]) != (args[1] == "="))
    if len(args) == 2 and args[0] in ("-n", "-z"):
        return int(bool(args[1]) != (args[0] == "-n"))
    if len(args) == 1:
        return int(not args[0])
    return 2
