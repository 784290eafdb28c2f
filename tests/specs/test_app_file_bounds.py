"""App files stay small once loaded: YAML aliases are refused, metadata is bounded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asyncsched.errors import AppFileError, SpecError
from asyncsched.specs import Workspace, app_to_dict, load_app_file
from asyncsched.specs.serialize import MAX_METADATA_BYTES

#: 329 bytes; yaml.safe_load expands it to a million strings (8 MB as JSON)
LAUGHS = """\
name: laughs
roles:
- name: r
  entrypoint: echo
  metadata:
    l0: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol,lol]
    l1: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]
    l2: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]
    l3: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]
    l4: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]
    l5: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]
"""


def test_a_yaml_alias_bomb_in_role_metadata_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "laughs.yaml"
    path.write_text(LAUGHS)
    assert path.stat().st_size < 400
    with pytest.raises(AppFileError) as err:
        load_app_file(str(path))
    assert err.value.path == str(path)
    assert "line 7: YAML aliases (*a) are not accepted" in str(err.value)


def test_the_cli_refuses_the_alias_bomb_with_a_one_line_usage_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "laughs.yaml"
    path.write_text(LAUGHS)
    proc = subprocess.run(
        [sys.executable, "-m", "asyncsched", "run", "--dryrun", "-f", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "ASYNCSCHED_STATE_DIR": str(tmp_path / "state")},
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .endswith("YAML aliases (*a) are not accepted; write the value out")
    )
    assert proc.stdout == ""


def test_anchors_without_aliases_still_load(tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(
        "name: a\nroles:\n- name: r\n  entrypoint: echo\n  metadata: &m {k: v}\n"
    )
    assert load_app_file(str(path)).roles[0].metadata == {"k": "v"}


def test_role_metadata_over_the_bound_is_refused(tmp_path: Path) -> None:
    big = {"blob": "x" * MAX_METADATA_BYTES}
    path = tmp_path / "app.json"
    app = {"name": "a", "roles": [{"name": "r", "entrypoint": "echo", "metadata": big}]}
    path.write_text(json.dumps(app))
    with pytest.raises(AppFileError) as err:
        load_app_file(str(path))
    assert err.value.field == "roles[0].metadata"
    assert f"more than the {MAX_METADATA_BYTES}" in err.value.message


def test_metadata_within_the_bound_loads_and_round_trips(tmp_path: Path) -> None:
    meta = {"blob": "x" * (MAX_METADATA_BYTES - 100)}
    path = tmp_path / "app.json"
    app = {
        "name": "a",
        "metadata": {"team": "ml"},
        "roles": [{"name": "r", "entrypoint": "echo", "metadata": meta}],
    }
    path.write_text(json.dumps(app))
    loaded = load_app_file(str(path))
    assert app_to_dict(loaded)["roles"][0]["metadata"] == meta


def test_app_metadata_over_the_bound_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(
        f"name: a\nmetadata: {{k: {'y' * MAX_METADATA_BYTES}}}\n"
        "roles:\n- name: r\n  entrypoint: echo\n"
    )
    with pytest.raises(AppFileError) as err:
        load_app_file(str(path))
    assert err.value.field == "metadata"


def test_a_workspace_string_with_an_alias_is_refused() -> None:
    with pytest.raises(SpecError, match=r"YAML aliases \(\*p\)"):
        Workspace.from_str("{~/a: &p x, ~/b: *p}")
