#!/usr/bin/env bash
# Build kube-apiserver, kube-controller-manager, kube-scheduler and kubelet
# v1.20.2 from Debian's `kubernetes` source package, offline (all Go modules
# are vendored), with Debian's Go 1.19, into OUT_DIR:
#
#   build.sh OUT_DIR
#
# Called by provision.sh only when OUT_DIR does not hold a finished build yet.
# Needs golang-go, gcc, dpkg-dev and `deb-src` lines in the apt sources.
# The source fixes are in patch_source.py; the kubelet is built with cgo (its
# container stats and mount code need it), the other three without.
set -euo pipefail

OUT_DIR=$1
HERE=$(cd "$(dirname "$0")" && pwd)
# a fixed path: Go's build cache keys packages by their directory, so a
# rebuild after a change of these scripts compiles only what changed
WORK="$(dirname "$OUT_DIR")/kube-build"
VERSION=v1.20.2

say() { printf 'realcluster/build.sh: %s\n' "$*"; }

rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK"
say "fetching the source package"
apt-get source -q --download-only kubernetes >/dev/null 2>&1 || apt-get source -q --download-only kubernetes
dsc=$(ls kubernetes_*.dsc)
case "$dsc" in
*really1.20.2*) ;;
*) say "expected Debian's kubernetes 1.20.5+really1.20.2, got $dsc"; exit 1 ;;
esac
dpkg-source -q -x "$dsc" src >/dev/null
cd src

python3 "$HERE/patch_source.py" .

export GOFLAGS=-mod=vendor GOPROXY=off GO111MODULE=on
export GOCACHE="${GOCACHE:-$(dirname "$OUT_DIR")/go-build}"
mkdir -p "$GOCACHE"

# pkg/generated/openapi is not in the tarball: generate it as the upstream
# Makefile does, with the vendored openapi-gen over every package carrying a
# `+k8s:openapi-gen=` tag (code-generator and sample-apiserver excluded).
say "generating pkg/generated/openapi"
CGO_ENABLED=0 go build -o "$WORK/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
inputs=$(
    {
        grep -rl --include='*.go' '^// *+k8s:' pkg cmd plugin || true
        grep -Rl --include='*.go' '^// *+k8s:' vendor || true
    } | xargs grep -l '+k8s:openapi-gen=' |
        grep -v -e '^vendor/k8s.io/code-generator/' -e '^vendor/k8s.io/sample-apiserver/' |
        xargs -n1 dirname | LC_ALL=C sort -u |
        sed -e 's#^vendor/##' -e 's#^\(pkg\|cmd\|plugin\)/#k8s.io/kubernetes/\1/#' |
        paste -sd, -
)
"$WORK/openapi-gen" -i "$inputs" -p k8s.io/kubernetes/pkg/generated/openapi \
    -O zz_generated.openapi -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt \
    -r "$WORK/openapi-violations.txt" -o "$WORK/gen"
cp "$WORK/gen/k8s.io/kubernetes/pkg/generated/openapi/zz_generated.openapi.go" pkg/generated/openapi/

# /version and --version: both copies of the version variables
ldflags="-s -w"
for v in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $v.gitVersion=$VERSION -X $v.gitMajor=1 -X $v.gitMinor=20"
    ldflags="$ldflags -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
    ldflags="$ldflags -X $v.gitCommit=debian-1.20.5+really1.20.2"
done
mkdir -p "$WORK/bin"
say "building kube-apiserver, kube-controller-manager, kube-scheduler (cgo off)"
CGO_ENABLED=0 go build -tags selinux,notest -ldflags "$ldflags" -o "$WORK/bin/" \
    ./cmd/kube-apiserver ./cmd/kube-controller-manager ./cmd/kube-scheduler
say "building kubelet (cgo on)"
CGO_ENABLED=1 go build -tags selinux,notest -ldflags "$ldflags" -o "$WORK/bin/" ./cmd/kubelet

"$WORK/bin/kube-apiserver" --version
rm -rf "$OUT_DIR"
mkdir -p "$OUT_DIR"
mv "$WORK/bin" "$OUT_DIR/bin"
printf '%s\n' "$VERSION" >"$OUT_DIR/VERSION"
cd /
rm -rf "$WORK"
say "done: $OUT_DIR/bin"
