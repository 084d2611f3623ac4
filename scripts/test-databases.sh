#!/usr/bin/env bash
# Starts the Debian PostgreSQL and MariaDB servers and creates the account the external-database
# tests use (OUTPOST_TEST_PG / OUTPOST_TEST_MYSQL in test/e2e/external-db.test.ts) and the suites
# that store Outpost's own data in PostgreSQL. Run as root
# (CI) or with sudo; safe to run again.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null; then SUDO="sudo"; fi
# a command as the postgres account
as_postgres() { (cd / && if [ "$(id -u)" = "0" ]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi); }

$SUDO service postgresql start >/dev/null || $SUDO pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -1)" main start
$SUDO service mariadb start >/dev/null || $SUDO service mysql start >/dev/null
for i in $(seq 1 50); do
  as_postgres psql -qAtc "SELECT 1" >/dev/null 2>&1 && $SUDO mariadb -e "SELECT 1" >/dev/null 2>&1 && break
  sleep 0.2
done

as_postgres psql -q <<'SQL'
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'outpost') THEN CREATE ROLE outpost LOGIN PASSWORD 'outpost-test-pw'; END IF;
END $$;
-- the suites that run Outpost itself on PostgreSQL give each test its own database (test/pgdb.ts)
ALTER ROLE outpost CREATEDB;
SQL
as_postgres psql -qAtc "SELECT 1 FROM pg_database WHERE datname = 'outpost_test'" | grep -q 1 || as_postgres createdb -O outpost outpost_test

$SUDO mariadb <<'SQL'
CREATE DATABASE IF NOT EXISTS outpost_test;
CREATE USER IF NOT EXISTS 'outpost'@'localhost' IDENTIFIED BY 'outpost-test-pw';
CREATE USER IF NOT EXISTS 'outpost'@'127.0.0.1' IDENTIFIED BY 'outpost-test-pw';
GRANT ALL PRIVILEGES ON outpost_test.* TO 'outpost'@'localhost';
GRANT ALL PRIVILEGES ON outpost_test.* TO 'outpost'@'127.0.0.1';
FLUSH PRIVILEGES;
SQL
echo "test databases ready: postgres and mariadb (user outpost, database outpost_test)"
