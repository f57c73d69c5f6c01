#!/usr/bin/env bash
# Local servers for the integration tests, on loopback: PostgreSQL, Redis, RabbitMQ and NATS (JetStream).
#   scripts/services.sh up      start what is installed but stopped (install from Debian's packages when
#                               missing and running as root), then wait until each one answers
#   scripts/services.sh status  say which answer; exit 1 if any does not
# No Docker: these are the Debian packages the machines have.
set -uo pipefail

TIMEOUT=${SERVICES_TIMEOUT:-90}

log() { printf '[services] %s\n' "$*"; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() { # name port
  local name=$1 port=$2 waited=0
  until port_open "$port"; do
    if (( waited >= TIMEOUT )); then log "$name did not answer on 127.0.0.1:$port after ${TIMEOUT}s"; return 1; fi
    sleep 1; waited=$((waited + 1))
  done
  log "$name answers on 127.0.0.1:$port"
}

apt_updated=0
ensure_package() { # command package
  command -v "$1" >/dev/null 2>&1 && return 0
  if [[ $(id -u) -ne 0 ]]; then log "$1 is missing and we are not root: install Debian package '$2'"; return 1; fi
  if (( apt_updated == 0 )); then DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null && apt_updated=1; fi
  log "installing $2"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}

start_postgres() {
  port_open 5432 && return 0
  ensure_package pg_ctlcluster postgresql || return 1
  local version; version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
  if [[ -z $version ]]; then log "no PostgreSQL cluster under /etc/postgresql"; return 1; fi
  log "starting PostgreSQL $version"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start
}

ensure_postgres_db() {
  # The tests connect as postgres to database 'test' (trust auth on loopback).
  if command -v psql >/dev/null && ! psql -h 127.0.0.1 -U postgres -d test -tAc 'select 1' >/dev/null 2>&1; then
    psql -h 127.0.0.1 -U postgres -d postgres -c 'create database test' >/dev/null 2>&1 || true
  fi
}

start_redis() {
  port_open 6379 && return 0
  ensure_package redis-server redis-server || return 1
  mkdir -p /var/lib/redis /var/log/redis
  log "starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
}

start_rabbitmq() {
  port_open 5672 && return 0
  ensure_package rabbitmq-server rabbitmq-server || return 1
  log "starting RabbitMQ"
  rabbitmq-server -detached
}

start_nats() {
  port_open 4222 && return 0
  ensure_package nats-server nats-server || return 1
  mkdir -p /var/lib/nats-server
  log "starting NATS with JetStream"
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
}

status() {
  local failed=0 name port
  for entry in postgresql:5432 redis:6379 rabbitmq:5672 nats:4222; do
    name=${entry%%:*}; port=${entry##*:}
    if port_open "$port"; then log "$name: up (127.0.0.1:$port)"; else log "$name: DOWN (127.0.0.1:$port)"; failed=1; fi
  done
  return $failed
}

up() {
  local failed=0
  start_postgres || failed=1
  start_redis || failed=1
  start_rabbitmq || failed=1
  start_nats || failed=1
  wait_for postgresql 5432 || failed=1
  wait_for redis 6379 || failed=1
  wait_for rabbitmq 5672 || failed=1
  wait_for nats 4222 || failed=1
  ensure_postgres_db
  return $failed
}

case ${1:-status} in
  up) up ;;
  status) status ;;
  *) echo "usage: $0 up|status" >&2; exit 2 ;;
esac
