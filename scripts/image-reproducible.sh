#!/usr/bin/env bash
# Reproducibility check of `npm run image`: builds the image from fresh clones of HEAD in two
# different folders (each: git clone, npm ci, npm run image) and fails unless both give the same
# image digest, byte for byte (manifest, config and both layers).
#
#   bash scripts/image-reproducible.sh                   two fresh clones (about 2 x 6 min here)
#   bash scripts/image-reproducible.sh --against DIR     one fresh clone, compared with the image
#                                                        already built in DIR (e.g. build/image of a
#                                                        clean checkout: CI's own checkout is a fresh
#                                                        clone, so this is still two fresh clones)
# Needs root, like npm run image. On a mismatch the clones (with their layer tars) are kept and
# the entries of a differing layer are listed.
set -euo pipefail
export LC_ALL=C

root=$(cd "$(dirname "$0")/.." && pwd)
against=""
case "${1:-}" in
  --against) against=$(cd "$2" && pwd) ;;
  "") ;;
  *) echo "usage: image-reproducible.sh [--against IMAGE_DIR]" >&2; exit 2 ;;
esac

commit=$(git -C "$root" rev-parse HEAD)
base=$(mktemp -d /tmp/hermes-aip-image-repro-XXXXXX)
keep=false
trap '[ "$keep" = true ] || rm -rf "$base"' EXIT

build_clone() {
  local dir=$1
  git clone --quiet --no-local "$root" "$dir"
  git -C "$dir" checkout --quiet --detach "$commit"
  (cd "$dir" && npm ci --no-audit --no-fund --prefer-offline --loglevel=error >/dev/null && IMAGE_KEEP_WORK=1 npm run image --silent)
}

t0=$(date +%s)
images=()
if [ -n "$against" ]; then
  [ -f "$against/digest" ] || { echo "image-reproducible: $against/digest missing: run npm run image" >&2; exit 1; }
  revision=$(node -e 'const m = JSON.parse(require("fs").readFileSync(process.argv[1] + "/oci/index.json")).manifests[0]; const c = JSON.parse(require("fs").readFileSync(process.argv[1] + "/oci/blobs/" + m.digest.replace(":", "/"))); const cfg = JSON.parse(require("fs").readFileSync(process.argv[1] + "/oci/blobs/" + c.config.digest.replace(":", "/"))); process.stdout.write(cfg.config.Labels["org.opencontainers.image.revision"])' "$against")
  [ "$revision" = "$commit" ] || { echo "image-reproducible: $against was built from $revision, not the clean commit $commit" >&2; exit 1; }
  images+=("$against")
  echo "image-reproducible: building from a fresh clone of $commit"
  build_clone "$base/clone"
  images+=("$base/clone/build/image")
else
  for n in 1 2; do
    echo "image-reproducible: building from fresh clone $n of $commit"
    build_clone "$base/clone-$n"
    images+=("$base/clone-$n/build/image")
  done
fi

layers() { node -e 'const fs = require("fs"); const d = process.argv[1]; const m = JSON.parse(fs.readFileSync(d + "/oci/blobs/" + fs.readFileSync(d + "/digest", "utf8").trim().replace(":", "/"))); console.log(["config " + m.config.digest, ...m.layers.map((l, i) => "layer" + i + " " + l.digest)].join("\n"))' "$1"; }

first=$(cat "${images[0]}/digest")
second=$(cat "${images[1]}/digest")
echo "image-reproducible: ${images[0]}: $first"
echo "image-reproducible: ${images[1]}: $second"
if [ "$first" = "$second" ]; then
  echo "image-reproducible: same digest from both builds ($(( $(date +%s) - t0 ))s)"
  exit 0
fi
keep=true
echo "image-reproducible: DIFFERENT digests; kept in $base" >&2
diff <(layers "${images[0]}") <(layers "${images[1]}") >&2 || true
for tarball in rootfs.tar app.tar; do
  a=${images[0]}/work/$tarball b=${images[1]}/work/$tarball
  [ -f "$a" ] && [ -f "$b" ] || continue
  cmp -s "$a" "$b" && continue
  echo "image-reproducible: $tarball differs; entries (tar -tv) that differ:" >&2
  diff <(tar -tv --full-time -f "$a") <(tar -tv --full-time -f "$b") | head -40 >&2 || true
done
exit 1
