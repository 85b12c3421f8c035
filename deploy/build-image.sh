#!/usr/bin/env bash
# Builds the cloudstack-ccm image without a daemon or a registry:
#   1. the controller manager as one static binary (glibc, `+crt-static`), release profile,
#      without the `demo` feature (no simulator, no fake API server in the image);
#   2. a build context with that binary and the build host's CA bundle;
#   3. `podman build` with the `Dockerfile` at the repository root (FROM scratch).
#
# Usage: deploy/build-image.sh [TAG]           (default tag: cloudstack-ccm:dev)
# Environment: BUILDER=podman|docker|buildah   (default: the first one found)
#              PODMAN_FLAGS="--storage-driver vfs"  extra global flags for podman/buildah
#              CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
set -euo pipefail
cd "$(dirname "$0")/.."

tag="${1:-cloudstack-ccm:dev}"
target="$(rustc -vV | sed -n 's/^host: //p')"
case "$target" in
  *-linux-gnu) ;;
  *) echo "build-image.sh: the static build needs a *-linux-gnu host, not $target" >&2; exit 1 ;;
esac
ca_bundle="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
[ -s "$ca_bundle" ] || { echo "build-image.sh: no CA bundle at $ca_bundle (set CA_BUNDLE)" >&2; exit 1; }

echo "== static release build ($target, no demo)"
# With --target, RUSTFLAGS apply to the target only, not to build scripts or proc macros.
# The image's binary carries no symbol table (about 3 MB of a 16.7 MB binary): a panic
# still says its message and file:line, a RUST_BACKTRACE shows addresses only. The symbol
# table is never loaded, so memory is the same either way.
CARGO_PROFILE_RELEASE_STRIP=symbols RUSTFLAGS="-C target-feature=+crt-static" \
  cargo build --release --locked -p cloudstack-ccm --no-default-features --target "$target"
binary="${CARGO_TARGET_DIR:-target}/$target/release/cloudstack-ccm"
if ldd "$binary" 2>&1 | grep -q '=>'; then
  echo "build-image.sh: $binary is dynamically linked" >&2; exit 1
fi

context="${CARGO_TARGET_DIR:-target}/image-context"
rm -rf "$context" && mkdir -p "$context"
install -m 0755 "$binary" "$context/cloudstack-ccm"
install -m 0644 "$ca_bundle" "$context/ca-certificates.crt"
echo "binary: $(stat -c %s "$context/cloudstack-ccm") bytes"

builder="${BUILDER:-}"
if [ -z "$builder" ]; then
  for candidate in podman docker buildah; do
    command -v "$candidate" >/dev/null && { builder="$candidate"; break; }
  done
fi
[ -n "$builder" ] || { echo "build-image.sh: no podman, docker or buildah on the PATH" >&2; exit 1; }
echo "== $builder build -t $tag"
case "$builder" in
  buildah) buildah ${PODMAN_FLAGS:-} bud -f Dockerfile -t "$tag" "$context" ;;
  podman) podman ${PODMAN_FLAGS:-} build -f Dockerfile -t "$tag" "$context" ;;
  *) "$builder" build -f Dockerfile -t "$tag" "$context" ;;
esac
