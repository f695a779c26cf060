#!/bin/sh
# Writes every secret file compose.yml names under ./secrets/, as root on the Docker host, once: an existing
# file is kept (a new host seed would be a new DID, which the admitted package no longer names). Each file
# is owned by the uid that reads it (10001: the hosts, the runtime and the edge; 999: PostgreSQL), mode 0600;
# the CA certificate, which is public, 0644. Needs openssl and the image loaded as hermes-aip-host:0.1.0.
#
#   sudo ./init-secrets.sh                # after writing the Hermes API key to ./secrets/hermes-api.key
set -eu
cd "$(dirname "$0")"
image=${HERMES_AIP_IMAGE:-hermes-aip-host:0.1.0}
[ "$(id -u)" = 0 ] || { echo "init-secrets: run as root (the files are handed to uids 10001 and 999)" >&2; exit 1; }
[ -s secrets/hermes-api.key ] || { echo "init-secrets: write the Hermes API key to $(pwd)/secrets/hermes-api.key first" >&2; exit 1; }
umask 077

# new FILE OWNER COMMAND...: FILE from COMMAND's output, unless it exists.
new() {
  file=secrets/$1 owner=$2
  shift 2
  [ -e "$file" ] || "$@" >"$file"
  chown "$owner:$owner" "$file"
  chmod 600 "$file"
}
random_hex() { openssl rand -hex "$1"; }
# The did:key of a seed file, as the host computes it (hermes-aip host --print-did).
did_of() {
  docker run --rm --network none --read-only --cap-drop ALL --user 10001:10001 \
    -v "$(pwd)/secrets/$1:/run/secrets/seed:ro" -e AIP_CONNECTOR_HOST_SIGNING_SEED_FILE=/run/secrets/seed \
    "$image" host --print-did
}
database_url() { printf 'postgres://%s:%s@postgres:5432/%s\n' "$1" "$(cat "secrets/$2")" "$3"; }

chown 10001:10001 secrets/hermes-api.key
chmod 600 secrets/hermes-api.key
for seed in host-a host-b control-plane gateway; do new "$seed.seed" 10001 random_hex 32; done
new control-plane.did 10001 did_of control-plane.seed
new gateway.did 10001 did_of gateway.seed
for password in postgres ledger-db registry-db; do new "$password.password" 999 random_hex 24; done
new ledger-database.url 10001 database_url hermes_aip ledger-db.password hermes_aip_ledger
new registry-database.url 10001 database_url aip_registry registry-db.password aip_registry

# The edge's certificate for every public name, from a private CA whose key is dropped once it signed.
if [ ! -e secrets/edge.crt ]; then
  work=$(mktemp -d)
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 825 -subj "/CN=hermes-aip compose CA" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
    -keyout "$work/ca.key" -out secrets/edge-ca.pem 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=aip.test" -keyout secrets/edge.key -out "$work/edge.csr" 2>/dev/null
  printf 'subjectAltName=DNS:control.aip.test,DNS:gateway.aip.test,DNS:hermes-a.aip.test,DNS:hermes-b.aip.test\nextendedKeyUsage=serverAuth\n' >"$work/ext"
  openssl x509 -req -in "$work/edge.csr" -CA secrets/edge-ca.pem -CAkey "$work/ca.key" -CAserial "$work/ca.srl" -CAcreateserial -days 397 \
    -extfile "$work/ext" -out secrets/edge.crt 2>/dev/null
  rm -rf "$work"
fi
chown 10001:10001 secrets/edge-ca.pem secrets/edge.crt secrets/edge.key
chmod 644 secrets/edge-ca.pem secrets/edge.crt
chmod 600 secrets/edge.key
echo "init-secrets: $(ls secrets | wc -l) files in $(pwd)/secrets"
