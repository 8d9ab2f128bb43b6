#!/usr/bin/env bash
# The Docker engine and the tooltree sandbox image, ready for the tests. Idempotent; run as root.
#
#   1. installs docker.io and mmdebstrap with apt-get when they are missing;
#   2. starts dockerd when no engine answers, and waits for it (at most 60 s);
#   3. builds the sandbox image (skipped when current), bootstrapping the base from the Debian
#      mirror that this machine's apt sources name, because no image registry can be reached.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
log() { echo "docker-setup: $*" >&2; }

export DEBIAN_FRONTEND=noninteractive
updated=""
apt_install() {
  [ -n "$updated" ] || { apt-get update -qq; updated=1; }
  apt-get install -y -qq "$@" >/dev/null
}
if ! command -v dockerd >/dev/null 2>&1; then
  log "installing docker.io"
  apt_install --no-install-recommends docker.io
fi
if ! command -v mmdebstrap >/dev/null 2>&1; then
  log "installing mmdebstrap"
  apt_install mmdebstrap
fi

if ! docker info >/dev/null 2>&1; then
  log "starting dockerd (log: /tmp/dockerd.log)"
  nohup dockerd >/tmp/dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  if ! docker info >/dev/null 2>&1; then
    log "dockerd did not answer within 60 s"
    tail -n 30 /tmp/dockerd.log >&2 || true
    exit 1
  fi
fi
log "engine $(docker version --format '{{.Server.Version}}')"

PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m sandbox.image build --offline-base
