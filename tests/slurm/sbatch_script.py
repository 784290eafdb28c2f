"""Read a batch script as sbatch and bash do (test helpers, no cluster needed).

:func:`sbatch_directives` follows sbatch's own reader (Slurm 22.05, src/sbatch
opt.c): the script is split at ``\\n`` only; ``#SBATCH`` lines give options,
whitespace-separated with ``'``/``"`` quotes and ``\\`` escapes, and an unquoted
``#`` ends the line; a line that is neither blank nor a comment ends the
directives; a ``hetjob`` (or ``packjob``) token starts the next component.
:func:`srun_argv` lets bash itself expand the ``srun`` command line, and
:func:`run_components` runs what srun would start in each component (here,
without Slurm), with the environment files in place.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

__all__ = [
    "HOSTILE",
    "bash_syntax_ok",
    "component_commands",
    "run_components",
    "sbatch_directives",
    "srun_argv",
]

#: values that try to leave their line, option or quoting, by what they try
HOSTILE = {
    "newline": "a\nb",
    "newline then directive": "x\n#SBATCH --uid=0",
    "newline then command": "x\ntouch /tmp/asyncsched-pwned",
    "carriage return": "a\rb",
    "NUL": "a\0b",
    "tab": "a\tb",
    "vertical tab": "a\vb",
    "next line (U+0085)": "a\x85b",
    "line separator (U+2028)": "a\u2028b",
    "space, extra option": "normal --uid=0",
    "leading space": " 10",
    "trailing newline": "10\n",
    "semicolon": "a;touch /tmp/asyncsched-pwned",
    "command substitution": "$(touch /tmp/asyncsched-pwned)",
    "backticks": "`touch /tmp/asyncsched-pwned`",
    "single quote": "it's",
    "double quote": 'say "hi"',
    "backslash": "a\\",
    "hash": "a#b",
    "separator word": "hetjob",
    "separator inside": "xPackJobx",
    "empty": "",
    "unencodable": "\ud800",
}

_C_SPACE = " \t\n\v\f\r"  # isspace() in the C locale
_SEPARATORS = ("hetjob", "packjob")


def _arguments(line: str) -> list[str]:
    out: list[str] = []
    i = 0
    while True:
        while i < len(line) and line[i] in _C_SPACE:
            i += 1
        if i >= len(line):
            return out
        arg: list[str] = []
        quote = ""
        escaped = False
        while i < len(line) and (quote or line[i] not in _C_SPACE):
            char = line[i]
            i += 1
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
                continue
            elif quote:
                if char == quote:
                    quote = ""
                    continue
            elif char in "'\"":
                quote = char
                continue
            elif char == "#":
                return [*out, "".join(arg)] if arg else out
            arg.append(char)
        if quote:
            raise ValueError(f"sbatch: unmatched {quote} in {line!r}")
        if arg:
            out.append("".join(arg))


def sbatch_directives(script: str) -> list[list[str]]:
    """The options sbatch reads from ``script``, one list per component."""
    components: list[list[str]] = [[]]
    for line in script.split("\n"):
        if line.startswith(("#SBATCH", "#SLURM")):
            rest = line[len("#SBATCH") :] if line.startswith("#SBATCH") else line[6:]
            args = _arguments(rest)
            if [a.lower() for a in args] in ([w] for w in _SEPARATORS):
                components.append([])
            else:
                components[-1].extend(args)
            continue
        stripped = line.lstrip(_C_SPACE)
        if stripped and not stripped.startswith("#"):
            break
    return components


def bash_syntax_ok(script: str) -> tuple[bool, str]:
    """``bash -n``: whether bash parses ``script``, and its complaint."""
    with tempfile.NamedTemporaryFile("wb", suffix=".sh", delete=False) as fh:
        fh.write(script.encode("utf-8", "surrogateescape"))
    try:
        proc = subprocess.run(
            ["bash", "-n", fh.name], capture_output=True, text=True, check=False
        )
    finally:
        os.unlink(fh.name)
    return proc.returncode == 0, proc.stderr


def srun_argv(
    script: str, job_id: str = "4242", env_dir: str = "/env-dir"
) -> list[bytes]:
    """The arguments bash passes to ``srun`` (bash expands the line, with
    ``SLURM_JOB_ID=job_id`` and the script's ``env_dir``; the command is
    printed instead of run)."""
    start = script.index("\nsrun ") + len("\nsrun ")
    end = script.index("\nwait $!")
    line = script[start:end].removesuffix(" &")
    program = f"printf '%s\\0' {line}"
    proc = subprocess.run(
        ["bash", "-c", program],
        capture_output=True,
        check=True,
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "SLURM_JOB_ID": job_id,
            "env_dir": env_dir,
        },
        input=b"",
    )
    return proc.stdout.split(b"\0")[:-1]


def component_commands(argv: list[bytes]) -> list[list[bytes]]:
    """What srun starts in each component: the words after its options."""
    groups: list[list[bytes]] = [[]]
    for arg in argv:
        if arg == b":":
            groups.append([])
        else:
            groups[-1].append(arg)
    commands = []
    for group in groups:
        k = 0
        while k < len(group) and group[k].startswith(b"--"):
            k += 1
        commands.append(group[k:])
    return commands


def run_components(
    script: str, env_files: dict[str, str], env_dir: Path, job_id: str = "4242"
) -> list[bytes]:
    """Write ``env_files`` into ``env_dir``, run each component's command as
    srun would (from an environment with only PATH), and return their stdouts."""
    env_dir.mkdir(mode=0o700, exist_ok=True)
    for name, text in env_files.items():
        (env_dir / name).write_bytes(text.encode("utf-8", "surrogateescape"))
    outputs = []
    for command in component_commands(srun_argv(script, job_id, str(env_dir))):
        proc = subprocess.run(
            command,
            capture_output=True,
            check=True,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )
        outputs.append(proc.stdout)
    return outputs
