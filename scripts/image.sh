#!/usr/bin/env bash
# `npm run image`: builds the OCI image of `hermes-aip host` into build/image/, reproducibly.
#
#   build/image/oci/                   OCI image layout (tag = package version), made by umoci
#   build/image/digest                 sha256:<manifest digest> — the image digest
#   build/image/bundle/                the image unpacked by umoci (rootfs/ + config.json), for the tests
#   build/image/sbom.cdx.json          CycloneDX 1.6 SBOM: every npm package and every dpkg package
#   build/image/provenance.intoto.json in-toto Statement v1 with a SLSA v1 provenance predicate
#   build/image/debian-packages.txt    the dpkg packages the root filesystem got (= image/debian-packages.lock)
#
# Two layers: a Debian trixie root filesystem (mmdebstrap, every package pinned by
# image/debian-packages.lock) and the application (/app: dist, package.json, package-lock.json,
# contracts, schemas, production node_modules). Same commit + same lockfiles = same digest: every
# timestamp is SOURCE_DATE_EPOCH (the commit time), tar entries are sorted with fixed owners, and
# umoci writes the manifest and config with that time. See docs/image.md.
#
# Options:
#   --update-debian-lock   write the dpkg packages the build resolved to image/debian-packages.lock
#                          instead of failing when they differ from it
# Environment:
#   IMAGE_OUT              output folder (default build/image)
#   IMAGE_SOURCE           org.opencontainers.image.source (default: package.json repository.url)
#   IMAGE_KEEP_WORK=1      keep build/image/work (the layer tars and the staging folder)
set -euo pipefail
umask 022
export LC_ALL=C TZ=UTC

update_lock=false
for arg in "$@"; do
  case "$arg" in
    --update-debian-lock) update_lock=true ;;
    *) echo "image: unknown option $arg" >&2; exit 2 ;;
  esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${IMAGE_OUT:-$root/build/image}
work=$out/work
lock=$root/image/debian-packages.lock
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
t0=$(date +%s)

die() { echo "image: $*" >&2; exit 1; }
step() { echo "image: [$(( $(date +%s) - t0 ))s] $*"; }

[ "$(id -u)" = 0 ] || die "needs root (mmdebstrap --mode=root, umoci unpack); run it as root or in CI"
for tool in mmdebstrap umoci tar git node npm; do
  command -v "$tool" >/dev/null || die "missing $tool (apt-get install mmdebstrap umoci)"
done

# --- what is being built ---------------------------------------------------------------------
commit=$(git rev-parse HEAD)
revision=$commit
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "image: WARNING: the work tree has uncommitted changes; the image is labelled ${commit}-dirty and is not reproducible from the commit" >&2
  revision="${commit}-dirty"
fi
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct HEAD)
export SOURCE_DATE_EPOCH
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
name=$(node -p "require('./package.json').name")
version=$(node -p "require('./package.json').version")
source_url=${IMAGE_SOURCE:-$(node -p "const r = require('./package.json').repository; (typeof r === 'string' ? r : r?.url) ?? ''")}
# No public repository URL is recorded yet: the label then names the npm package (a purl).
[ -n "$source_url" ] || source_url="pkg:npm/$name"

# The Debian side: one suite, its security updates, amd64. Changing any of these changes the digest.
suite=trixie
mirrors=("deb http://deb.debian.org/debian $suite main" "deb http://deb.debian.org/debian-security $suite-security main")

rm -rf "$out"
mkdir -p "$work"

# --- layer 1: the root filesystem ------------------------------------------------------------
# Every package pinned to the version in the lock (priority 1001); a version the mirror no longer
# serves is not installed, and the comparison below fails the build loudly.
step "root filesystem: mmdebstrap $suite (nodejs, ca-certificates), pinned by image/debian-packages.lock"
prefs=$work/pins.pref
: >"$prefs"
if [ "$update_lock" = false ]; then
  [ -s "$lock" ] || die "image/debian-packages.lock is missing: run npm run image -- --update-debian-lock"
  while IFS='=' read -r package version_pin; do
    [ -n "$package" ] || continue
    printf 'Package: %s\nPin: version %s\nPin-Priority: 1001\n\n' "$package" "$version_pin" >>"$prefs"
  done <"$lock"
fi
mmdebstrap --quiet --mode=root --variant=essential --format=tar \
  --include=nodejs,ca-certificates \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --setup-hook="mkdir -p \"\$1/etc/apt/preferences.d\" && cp '$prefs' \"\$1/etc/apt/preferences.d/hermes-aip-image.pref\"" \
  --customize-hook='rm -f "$1/etc/apt/preferences.d/hermes-aip-image.pref" "$1/etc/resolv.conf" "$1/etc/hostname"' \
  --customize-hook='echo "hermes:x:10001:10001:hermes-aip host:/nonexistent:/usr/sbin/nologin" >>"$1/etc/passwd"' \
  --customize-hook='echo "hermes:x:10001:" >>"$1/etc/group"' \
  --customize-hook="chroot \"\$1\" dpkg-query -W -f='\${Package}=\${Version}\n' | sort >'$out/debian-packages.txt'" \
  "$suite" "$work/rootfs.tar" "${mirrors[@]}"

if [ "$update_lock" = true ]; then
  mkdir -p "$(dirname "$lock")"
  cp "$out/debian-packages.txt" "$lock"
  step "wrote image/debian-packages.lock ($(wc -l <"$lock") packages)"
elif ! diff -u "$lock" "$out/debian-packages.txt" >"$work/lock.diff"; then
  cat "$work/lock.diff" >&2
  echo "image: the root filesystem's packages differ from image/debian-packages.lock (above: - locked, + resolved). A pinned version is gone from the mirror or a dependency changed: review, then npm run image -- --update-debian-lock" >&2
  exit 3
fi

# --- layer 2: the application ----------------------------------------------------------------
step "application: tsc, npm ci --omit=dev (+ pg, better-sqlite3) from package-lock.json"
rm -rf dist
npm run build --silent
stage=$work/stage
mkdir -p "$stage"
cp package-lock.json "$stage/"
# The host needs a durable ledger: pg and better-sqlite3 are optional peers (devDependencies here);
# the image installs them as dependencies, at the lockfile's versions.
node -e '
  const fs = require("node:fs");
  const pkg = JSON.parse(fs.readFileSync("package.json", "utf8"));
  const dev = pkg.devDependencies;
  pkg.dependencies = { ...pkg.dependencies, "better-sqlite3": dev["better-sqlite3"], pg: dev.pg };
  delete pkg.devDependencies;
  delete pkg.scripts;
  fs.writeFileSync(process.argv[1], JSON.stringify(pkg, null, 2) + "\n");
' "$stage/package.json"
(cd "$stage" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --prefer-offline --loglevel=error)
# better-sqlite3's native addon: the one this checkout's `npm ci` compiled from source (its install
# script's prebuild download cannot reach GitHub here); the compile is deterministic (same bytes from
# any checkout path), and obj.target proves it was compiled, not downloaded.
addon=node_modules/better-sqlite3/build/Release/better_sqlite3.node
[ -f "$addon" ] && [ -d node_modules/better-sqlite3/build/Release/obj.target ] ||
  die "$addon was not compiled here: run npm ci (or npm rebuild better-sqlite3 --build-from-source) first"
[ "$(node -p "require('./node_modules/better-sqlite3/package.json').version")" = "$(node -p "require('$stage/node_modules/better-sqlite3/package.json').version")" ] ||
  die "node_modules/better-sqlite3 is not the lockfile's version: run npm ci"
mkdir -p "$stage/$(dirname "$addon")"
cp "$addon" "$stage/$addon"
rm -f "$stage/node_modules/.package-lock.json"
node_modules/.bin/tsx scripts/image/check-stage.ts package-lock.json "$stage"

# The SBOM's npm half, from the staged tree (npm ls), before the tree moves into the layer.
step "SBOM (npm): cyclonedx-npm"
(cd "$stage" && "$root/node_modules/.bin/cyclonedx-npm" --output-reproducible --spec-version 1.6 --output-format JSON \
  --flatten-components --output-file "$work/npm.cdx.json" package.json)

app=$work/app-layer/app
mkdir -p "$app"
cp -r dist contracts schemas package.json package-lock.json "$app/"
mv "$stage/node_modules" "$app/node_modules"
chmod -R u+rwX,go+rX,go-w "$work/app-layer"
tar -C "$work/app-layer" --create --file "$work/app.tar" --sort=name --format=posix \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner app

# --- the image -------------------------------------------------------------------------------
step "OCI layout: umoci (layers, config, labels)"
image="$out/oci:$version"
umoci init --layout "$out/oci"
umoci new --image "$image"
umoci raw add-layer --image "$image" --history.created "$created" \
  --history.created_by "mmdebstrap --variant=essential --include=nodejs,ca-certificates $suite (image/debian-packages.lock)" \
  "$work/rootfs.tar"
umoci raw add-layer --image "$image" --history.created "$created" \
  --history.created_by "/app: tsc dist, npm ci --omit=dev from package-lock.json" "$work/app.tar"
labels=(
  "org.opencontainers.image.source=$source_url"
  "org.opencontainers.image.revision=$revision"
  "org.opencontainers.image.version=$version"
  "org.opencontainers.image.created=$created"
  "org.opencontainers.image.title=$name"
  "org.opencontainers.image.description=hermes-aip host: AIP remote connector host for Hermes Agent"
  "org.opencontainers.image.licenses=Apache-2.0"
)
config_args=(
  --created "$created" --history.created "$created" --history.created_by "umoci config"
  --architecture amd64 --os linux
  --config.user 10001:10001
  --config.workingdir /app
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  --config.env NODE_ENV=production
  --config.env "HERMES_AIP_REVISION=$revision"
  --config.entrypoint /usr/bin/node --config.entrypoint /app/dist/cli/main.js
  --config.cmd host
  --config.exposedports 8081/tcp
  --config.stopsignal SIGTERM
)
for label in "${labels[@]}"; do config_args+=(--config.label "$label" --manifest.annotation "$label"); done
umoci config --image "$image" "${config_args[@]}"
umoci gc --layout "$out/oci"

digest=$(node -e '
  const index = JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8"));
  if (index.manifests.length !== 1) throw new Error("expected one manifest in index.json");
  process.stdout.write(index.manifests[0].digest);
' "$out/oci/index.json")
echo "$digest" >"$out/digest"

step "unpack (umoci) for the tests and the SBOM's Debian half"
umoci unpack --image "$image" "$out/bundle" >/dev/null

step "SBOM (merge + validate) and provenance"
node_modules/.bin/tsx scripts/image/sbom.ts --npm "$work/npm.cdx.json" --rootfs "$out/bundle/rootfs" \
  --name "$name" --version "$version" --digest "$digest" --out "$out/sbom.cdx.json"
node_modules/.bin/tsx scripts/image/provenance.ts --digest "$digest" --name "$name" --version "$version" \
  --commit "$commit" --revision "$revision" --source "$source_url" --source-date-epoch "$SOURCE_DATE_EPOCH" \
  --started "$started" --sbom "$out/sbom.cdx.json" --debian-suite "$suite" --out "$out/provenance.intoto.json"

[ "${IMAGE_KEEP_WORK:-}" = 1 ] || rm -rf "$work"
size=$(du -sb "$out/oci/blobs" | cut -f1)
step "done"
echo "image: $name:$version $digest"
echo "image: compressed size $(( size / 1024 / 1024 )) MiB, built in $(( $(date +%s) - t0 ))s"
