#!/bin/sh
# The postgres image runs this once, on the first start of an empty data folder: one role and one database
# for the hermes-aip hosts' run ledger (both replicas share it), one for the AIP runtime's connector registry.
# Passwords are read by psql from the secret files, never passed as arguments.
set -eu

create() {
  psql --no-psqlrc -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
    --set role="$1" --set database="$2" --set password_file="$3" <<'SQL'
\set password `cat :password_file`
CREATE ROLE :"role" LOGIN PASSWORD :'password';
CREATE DATABASE :"database" OWNER :"role";
SQL
}

create hermes_aip hermes_aip_ledger /run/secrets/ledger-db-password
create aip_registry aip_registry /run/secrets/registry-db-password
