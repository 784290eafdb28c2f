"""Source fixes that let Go 1.19 build Debian's Kubernetes 1.20 source tree.

Run once on a fresh tree (it refuses a tree it already patched):

    python3 patch_source.py SRC

1. ``vendor/modules.txt`` was written by Go 1.15, which listed some vendored
   packages under a wildcard replacement header (``# path => path version``,
   no version on the left). Newer Go reads such a header as a module without a
   version, so ``-mod=vendor`` stops with "updates to go.mod needed". Each such
   package gets the versioned header of the module that provides it (the
   longest versioned module path prefixing it) stated again just before it.
2. The vendored ``github.com/modern-go/reflect2`` v1.0.1 links to
   ``reflect.mapiterinit`` with its pre-Go-1.18 signature (it returned the
   iterator; since 1.18 the caller passes one in) and a two-field iterator
   struct: the binary links but crashes in ``runtime.mapiternext``. The
   iterator gets the runtime's full layout and the caller allocates it.
3. This machine refuses a negative ``oom_score_adj`` even to root, and the
   kubelet gives pod sandboxes -998 and Guaranteed pods -997: every pod then
   fails in runc. Both constants become 0.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

STAMP = ".asyncsched-patched"


def _is_versioned_header(fields: list[str]) -> bool:
    return len(fields) >= 3 and fields[0] == "#" and fields[2].startswith("v")


def _owner(package: str, versioned: dict[str, str]) -> str | None:
    best = None
    for path in versioned:
        if (package == path or package.startswith(path + "/")) and (
            best is None or len(path) > len(best)
        ):
            best = path
    return best


def fix_modules_txt(text: str) -> tuple[str, int]:
    lines = text.splitlines()
    versioned = {
        line.split()[1]: line for line in lines if _is_versioned_header(line.split())
    }
    out: list[str] = []
    wildcard = False  # under a "# path => ..." header without a version
    restated: str | None = None  # module whose header was last stated again
    moved = 0
    for line in lines:
        fields = line.split()
        if line.startswith("# "):
            wildcard = not _is_versioned_header(fields)
            restated = None
            out.append(line)
            continue
        if not wildcard or line.startswith("## ") or len(fields) != 1:
            out.append(line)
            continue
        owner = _owner(fields[0], versioned)
        if owner is not None and owner != restated:
            out.append(versioned[owner])
            restated = owner
            moved += 1
        out.append(line)
    return "\n".join(out) + "\n", moved


_OLD_MAPITERINIT = re.compile(
    r"//go:linkname mapiterinit reflect\.mapiterinit\n"
    r"func mapiterinit\(rtype unsafe\.Pointer, m unsafe\.Pointer\) \*hiter\n"
)

_NEW_MAPITERINIT = """//go:linkname reflectMapiterinit reflect.mapiterinit
func reflectMapiterinit(rtype unsafe.Pointer, m unsafe.Pointer, it *hiter)

// mapiterinit starts an iteration over m; since Go 1.18 the runtime fills an
// iterator the caller allocates.
func mapiterinit(rtype unsafe.Pointer, m unsafe.Pointer) *hiter {
\tit := new(hiter)
\treflectMapiterinit(rtype, m, it)
\treturn it
}
"""

_OLD_HITER = re.compile(r"type hiter struct \{\n.*?\n\}\n", re.DOTALL)

# The field order and types of the runtime's hash iterator (Go 1.18 - 1.21);
# key and value keep the names the rest of reflect2 uses.
_NEW_HITER = """type hiter struct {
\tkey         unsafe.Pointer
\tvalue       unsafe.Pointer
\tt           unsafe.Pointer
\th           unsafe.Pointer
\tbuckets     unsafe.Pointer
\tbptr        unsafe.Pointer
\toverflow    *[]unsafe.Pointer
\toldoverflow *[]unsafe.Pointer
\tstartBucket uintptr
\toffset      uint8
\twrapped     bool
\tB           uint8
\ti           uint8
\tbucket      uintptr
\tcheckBucket uintptr
}
"""


def fix_reflect2(text: str) -> str:
    text, n_init = _OLD_MAPITERINIT.subn(_NEW_MAPITERINIT, text)
    text, n_iter = _OLD_HITER.subn(_NEW_HITER, text)
    if (n_init, n_iter) != (1, 1):
        sys.exit(f"patch_source: reflect2 layout not recognised ({n_init}, {n_iter})")
    return text


def clamp_constant(text: str, name: str, old: str) -> str:
    pattern = re.compile(rf"(\b{name}\s+int\s*=\s*){re.escape(old)}\b")
    text, n = pattern.subn(r"\g<1>0", text)
    if n != 1:
        sys.exit(f"patch_source: constant {name} = {old} not found")
    return text


def _edit(path: Path, change: object) -> None:
    assert callable(change)
    path.write_text(change(path.read_text()))


def _say(text: str) -> None:
    sys.stdout.write(f"patch_source: {text}\n")


def main() -> None:
    src = Path(sys.argv[1])
    if (src / STAMP).exists():
        sys.exit(f"patch_source: {src} is already patched")
    modules = src / "vendor" / "modules.txt"
    text, restated = fix_modules_txt(modules.read_text())
    modules.write_text(text)
    _say(f"modules.txt: {restated} versioned header(s) stated again")
    _edit(src / "vendor/github.com/modern-go/reflect2/unsafe_link.go", fix_reflect2)
    _say("reflect2: Go 1.18+ map iterator")
    _edit(
        src / "pkg/kubelet/dockershim/docker_sandbox.go",
        lambda t: clamp_constant(t, "defaultSandboxOOMAdj", "-998"),
    )
    _edit(
        src / "pkg/kubelet/qos/policy.go",
        lambda t: clamp_constant(t, "guaranteedOOMScoreAdj", "-997"),
    )
    _say("kubelet: sandbox and Guaranteed oom_score_adj 0")
    (src / STAMP).write_text("patched\n")


if __name__ == "__main__":
    main()
