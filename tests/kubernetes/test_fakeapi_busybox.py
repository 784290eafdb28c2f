"""The fake pods' tiny shell: what test apps can rely on when they run "in a pod"."""

from __future__ import annotations

import pytest

from .fakeapi.busybox import Shell, StartError, kubelet_expand
from .fakeapi.patches import json_patch, merge_patch, strategic_merge_patch


async def _run(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    out: list[str] = []

    async def write(text: str) -> None:
        out.append(text)

    async def no_sleep(seconds: float) -> None:
        out.append(f"<sleep {seconds}>")

    code = await Shell(dict(env or {}), write, hostname="pod-0", sleep=no_sleep).run(
        argv
    )
    return code, "".join(out)


async def test_sh_c_expands_env_quotes_and_positional_args() -> None:
    script = "echo rank=$RANK \"${NAME}\" '$NAME' $0 $1; echo -n a; echo b"
    code, out = await _run(
        ["sh", "-c", script, "prog", "x"], {"RANK": "2", "NAME": "a b"}
    )
    assert code == 0
    assert out == "rank=2 a b $NAME prog x\nab\n"


async def test_exit_status_and_connectors() -> None:
    assert await _run(["sh", "-c", "false && echo no || echo yes; echo $?"]) == (
        0,
        "yes\n0\n",
    )
    assert await _run(["sh", "-c", "echo a; exit 7; echo b"]) == (7, "a\n")
    assert await _run(["sh", "-c", "true; false"]) == (1, "")
    assert await _run(["/bin/sh", "-c", "nosuch arg"]) == (
        127,
        "sh: nosuch: not found\n",
    )


async def test_builtins_printf_sleep_seq_hostname_assignments() -> None:
    script = "X=5; export Y=6; printf '%s=%d\\n' x $X y $Y; sleep 0.5; seq 2; hostname"
    code, out = await _run(["sh", "-c", script])
    assert code == 0
    assert out == "x=5\ny=6\n<sleep 0.5>1\n2\npod-0\n"


async def test_test_compares_strings_so_one_replica_can_exit_differently() -> None:
    script = "test $R = 1 && exit 3; echo runs"
    assert await _run(["sh", "-c", f"R=1; {script}"]) == (3, "")
    assert await _run(["sh", "-c", f"R=0; {script}"]) == (0, "runs\n")
    assert await _run(["sh", "-c", "test a != b && test -n a && test -z ''"]) == (0, "")


async def test_redirections_share_the_log_or_discard() -> None:
    code, out = await _run(
        ["sh", "-c", "echo err >&2; echo gone >/dev/null; echo ok 2>&1"]
    )
    assert (code, out) == (0, "err\nok\n")


async def test_exec_form_has_no_shell_expansion_and_unknown_programs_fail_to_start() -> (
    None
):
    assert await _run(["echo", "$HOME", "x"]) == (0, "$HOME x\n")
    with pytest.raises(StartError, match="executable file not found"):
        await _run(["python", "train.py"])


def test_kubelet_expands_defined_variables_only() -> None:
    env = {"A": "1"}
    assert kubelet_expand("$(A)-$(B)-$$(A)", env) == "1-$(B)-$(A)"


def test_patch_flavours() -> None:
    doc = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    assert merge_patch(doc, {"a": {"b": None, "c": [3]}}) == {"a": {"c": [3]}, "d": 1}
    ops = [
        {"op": "add", "path": "/a/c/-", "value": 3},
        {"op": "replace", "path": "/d", "value": 2},
        {"op": "test", "path": "/d", "value": 2},
        {"op": "move", "from": "/d", "path": "/e"},
    ]
    assert json_patch(doc, ops) == {"a": {"b": 1, "c": [1, 2, 3]}, "e": 2}
    assert doc == {"a": {"b": 1, "c": [1, 2]}, "d": 1}  # inputs are not modified
    pod = {"containerStatuses": [{"name": "a", "ready": False}, {"name": "b"}]}
    patched = strategic_merge_patch(
        pod, {"containerStatuses": [{"name": "a", "ready": True}]}
    )
    assert patched == {
        "containerStatuses": [{"name": "a", "ready": True}, {"name": "b"}]
    }
