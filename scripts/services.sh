#!/usr/bin/env bash
# Throwaway PostgreSQL, Redis and MariaDB for the @retrysafe/guard test suite.
#   scripts/services.sh start   # start all three (idempotent), create database retrysafe_test
#   scripts/services.sh stop    # stop all three
#   scripts/services.sh running [pg|redis|mysql]   # exit 0 when it (all three) answers
#   scripts/services.sh stop-pg|stop-redis|stop-mysql # stop one
#   scripts/services.sh env     # print the connection variables
# Prerequisite (Debian, as root): apt-get install -y postgresql redis-server mariadb-server
set -euo pipefail

PG_PORT="${RETRYSAFE_PG_PORT:-55432}"
REDIS_PORT="${RETRYSAFE_REDIS_PORT:-56379}"
MYSQL_PORT="${RETRYSAFE_MYSQL_PORT:-53306}"
BASE="${RETRYSAFE_SERVICES_DIR:-/tmp/retrysafe-services}"
PG_DIR="$BASE/pg"
PG_LOG="$BASE/pg.log"
REDIS_PIDFILE="$BASE/redis.pid"
REDIS_LOG="$BASE/redis.log"
MYSQL_DIR="$BASE/mariadb"
MYSQL_PIDFILE="$MYSQL_DIR/mariadb.pid"
MYSQL_LOG="$BASE/mariadb.log"
DB_NAME="retrysafe_test"

export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:${PG_PORT}/${DB_NAME}}"
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:${REDIS_PORT}}"
export MYSQL_URL="${MYSQL_URL:-mysql://root@127.0.0.1:${MYSQL_PORT}/${DB_NAME}}"

pg_bin() {
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)"
  if [ -z "$d" ] || [ ! -x "$d/pg_ctl" ]; then
    echo "services.sh: PostgreSQL binaries not found (apt-get install -y postgresql)" >&2
    exit 1
  fi
  echo "$d"
}

as_pg() {
  if [ "$(id -u)" = "0" ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

pg_ready() {
  psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -Atqc 'select 1' >/dev/null 2>&1
}

redis_ready() {
  [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null || true)" = "PONG" ]
}

start_pg() {
  local bin
  bin="$(pg_bin)"
  mkdir -p "$BASE"
  chmod 755 "$BASE"
  if ! pg_ready; then
    if [ ! -f "$PG_DIR/PG_VERSION" ]; then
      rm -rf "$PG_DIR"
      mkdir -p "$PG_DIR"
      if [ "$(id -u)" = "0" ]; then chown postgres:postgres "$PG_DIR"; fi
      as_pg "$bin/initdb" -D "$PG_DIR" -U postgres -A trust --no-sync >/dev/null
    fi
    # a stale pid file from a killed server would stop pg_ctl
    if [ -f "$PG_DIR/postmaster.pid" ] && ! as_pg "$bin/pg_ctl" -D "$PG_DIR" status >/dev/null 2>&1; then
      rm -f "$PG_DIR/postmaster.pid"
    fi
    touch "$PG_LOG"
    if [ "$(id -u)" = "0" ]; then chown postgres:postgres "$PG_LOG"; fi
    as_pg "$bin/pg_ctl" -D "$PG_DIR" -l "$PG_LOG" -w -t 60 \
      -o "-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
      start >/dev/null
    local i
    for i in $(seq 1 100); do pg_ready && break; sleep 0.1; done
    pg_ready || { echo "services.sh: PostgreSQL did not start; see $PG_LOG" >&2; exit 1; }
  fi
  if [ "$(psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -Atqc "select 1 from pg_database where datname='$DB_NAME'")" != "1" ]; then
    psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -qc "CREATE DATABASE $DB_NAME" >/dev/null
  fi
}

start_redis() {
  mkdir -p "$BASE"
  if ! redis_ready; then
    if ! command -v redis-server >/dev/null 2>&1; then
      echo "services.sh: redis-server not found (apt-get install -y redis-server)" >&2
      exit 1
    fi
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
      --daemonize yes --pidfile "$REDIS_PIDFILE" --logfile "$REDIS_LOG" --dir "$BASE" >/dev/null
    local i
    for i in $(seq 1 100); do redis_ready && break; sleep 0.1; done
    redis_ready || { echo "services.sh: Redis did not start; see $REDIS_LOG" >&2; exit 1; }
  fi
}

mysql_ready() {
  mariadb --protocol=tcp -h 127.0.0.1 -P "$MYSQL_PORT" -u root -e 'select 1' >/dev/null 2>&1
}

start_mysql() {
  mkdir -p "$BASE"
  if ! mysql_ready; then
    if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then
      echo "services.sh: mariadbd not found (apt-get install -y mariadb-server)" >&2
      exit 1
    fi
    local user=()
    if [ "$(id -u)" = "0" ]; then user=(--user=mysql); fi
    if [ ! -d "$MYSQL_DIR/mysql" ]; then
      rm -rf "$MYSQL_DIR"
      mkdir -p "$MYSQL_DIR"
      if [ "$(id -u)" = "0" ]; then chown mysql:mysql "$MYSQL_DIR"; fi
      mariadb-install-db "${user[@]}" --datadir="$MYSQL_DIR" --auth-root-authentication-method=normal \
        --skip-test-db >"$MYSQL_LOG" 2>&1 || { echo "services.sh: mariadb-install-db failed; see $MYSQL_LOG" >&2; exit 1; }
    fi
    touch "$MYSQL_LOG"
    if [ "$(id -u)" = "0" ]; then chown mysql:mysql "$MYSQL_LOG"; fi
    # a fresh process group, so this script's exit leaves the server running until `stop`
    setsid "$(command -v mariadbd || echo /usr/sbin/mariadbd)" --no-defaults "${user[@]}" --datadir="$MYSQL_DIR" \
      --port="$MYSQL_PORT" --bind-address=127.0.0.1 --socket="$MYSQL_DIR/sock" --pid-file="$MYSQL_PIDFILE" \
      --skip-grant-tables --skip-name-resolve --innodb-flush-log-at-trx-commit=0 --innodb-buffer-pool-size=64M \
      --max-connections=200 --log-error="$MYSQL_LOG" </dev/null >/dev/null 2>&1 &
    local server_pid=$!
    local i
    for i in $(seq 1 300); do
      mysql_ready && break
      # the server exited (bad option, no permission): stop waiting
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.2
    done
    mysql_ready || { echo "services.sh: MariaDB did not start; see $MYSQL_LOG" >&2; exit 1; }
  fi
  mariadb --protocol=tcp -h 127.0.0.1 -P "$MYSQL_PORT" -u root -e "CREATE DATABASE IF NOT EXISTS $DB_NAME" >/dev/null
}

stop_mysql() {
  if [ -f "$MYSQL_PIDFILE" ]; then
    local pid
    pid="$(cat "$MYSQL_PIDFILE")"
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid"
      local i
      for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$MYSQL_PIDFILE"
  fi
}

stop_pg() {
  if [ -f "$PG_DIR/PG_VERSION" ]; then
    local bin
    bin="$(pg_bin)"
    if as_pg "$bin/pg_ctl" -D "$PG_DIR" status >/dev/null 2>&1; then
      as_pg "$bin/pg_ctl" -D "$PG_DIR" -m fast -w stop >/dev/null
    fi
  fi
}

stop_redis() {
  if redis_ready; then
    redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
  fi
}

case "${1:-}" in
  start) start_pg; start_redis; start_mysql ;;
  stop) stop_pg; stop_redis; stop_mysql ;;
  running)
    case "${2:-all}" in
      pg) pg_ready ;;
      redis) redis_ready ;;
      mysql) mysql_ready ;;
      *) pg_ready && redis_ready && mysql_ready ;;
    esac ;;
  stop-pg) stop_pg ;;
  stop-redis) stop_redis ;;
  stop-mysql) stop_mysql ;;
  start-mysql) start_mysql ;;
  env) echo "DATABASE_URL=$DATABASE_URL"; echo "REDIS_URL=$REDIS_URL"; echo "MYSQL_URL=$MYSQL_URL" ;;
  *) echo "usage: $0 start|stop|running [pg|redis|mysql]|stop-pg|stop-redis|stop-mysql|env" >&2; exit 2 ;;
esac
