#!/usr/bin/env bash
# Builds the project's images as tarballs, without a Docker daemon, and imports them into the
# local cluster's containerd (namespace k8s.io) when it is running:
#
#   hack/cluster/images.sh [--no-import] [pause] [job] [operator]    # default: all three
#
#   pause     k8s.local/pause:dev                 hack/pause (the pod sandbox image)
#   job       k8s.local/lockedcron-e2e-job:dev    test/e2e/jobimage, entrypoint /usr/local/bin/e2e-job
#   operator  k8s.local/lockedcron:dev            cmd/manager -> /manager (entrypoint), cmd/lockwrap -> /lockwrap
#
# Static binaries (CGO_ENABLED=0) go to $STATE/build, tarballs to $LOCKEDCRON_IMAGE_DIR (default
# $STATE/images, which up.sh re-imports after a down/up). An image whose cmd/ package does not
# exist yet is skipped with a note. Prints one line per tarball: PATH NAME DIGEST.
source "$(dirname "$0")/lib.sh"
IMAGES_OUT=${LOCKEDCRON_IMAGE_DIR:-$STATE/images}
BUILD=$STATE/build
do_import=1
want=()
for a in "$@"; do
  case $a in
    --no-import) do_import=0 ;;
    pause|job|operator) want+=("$a") ;;
    *) die "usage: images.sh [--no-import] [pause] [job] [operator]" ;;
  esac
done
[ ${#want[@]} -gt 0 ] || want=(pause job operator)
mkdir -p "$IMAGES_OUT" "$BUILD"
cd "$REPO_ROOT"
export CGO_ENABLED=0
gobuild() { go build -trimpath -ldflags "-s -w" -o "$BUILD/$1" "$2"; }
go build -o "$BUILD/imagebuild" ./hack/imagebuild

image() { # NAME TARBALL imagebuild-args...
  local name=$1 tar=$2; shift 2
  "$BUILD/imagebuild" --name "$name" --out "$tar" "$@"
  if [ $do_import = 1 ] && [ -S "$CTR_SOCK" ]; then
    ctr_ -n k8s.io images import "$tar" >/dev/null
  fi
}

for w in "${want[@]}"; do
  case $w in
    pause)
      gobuild pause ./hack/pause
      image "$PAUSE_IMAGE" "$IMAGES_OUT/pause.tar" --file "$BUILD/pause=/pause" --entrypoint /pause ;;
    job)
      gobuild e2e-job ./test/e2e/jobimage
      image k8s.local/lockedcron-e2e-job:dev "$IMAGES_OUT/lockedcron-e2e-job.tar" \
        --file "$BUILD/e2e-job=/usr/local/bin/e2e-job" --entrypoint /usr/local/bin/e2e-job ;;
    operator)
      if [ ! -d cmd/manager ] || [ ! -d cmd/lockwrap ]; then
        log "images.sh: skipping k8s.local/lockedcron:dev (cmd/manager or cmd/lockwrap does not exist yet)"
        continue
      fi
      gobuild manager ./cmd/manager
      gobuild lockwrap ./cmd/lockwrap
      image k8s.local/lockedcron:dev "$IMAGES_OUT/lockedcron.tar" \
        --file "$BUILD/manager=/manager" --file "$BUILD/lockwrap=/lockwrap" --entrypoint /manager ;;
  esac
done
