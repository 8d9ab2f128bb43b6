#!/usr/bin/env bash
# The Docker engine and the tooltree sandbox image, ready for the tests. Idempotent; run as root.
#
#   1. installs docker.io and mmdebstrap with apt-get when they are missing;
#   2. starts dockerd when no engine answers, and waits for it (at most 60 s);
#   3. installs gVisor (Debian's runsc) and registers it with the engine as the runtimes "runsc" and
#      "runsc-alias", so the gVisor tests run instead of skipping (CI sets REQUIRE_GVISOR=1); with
#      --test-runtimes (as .ci/run asks) also "tooltree-test-unlimited", "-seccomp", "-network" and "-mounts"
#      (.ci/runc-loosened: runc that applies no memory, pids or CPU limit, allows what tooltree's seccomp profile
#      removes, shares the host's network, or leaves the root writable and the tmpfs executable), under which the
#      tests check that no sandbox starts (CI sets REQUIRE_TEST_RUNTIMES=1). Runtimes that leave out confinement
#      have no place on an engine that runs anything else, so they are registered only when asked for;
#   4. builds the sandbox image (skipped when current), bootstrapping the base from the Debian
#      mirror that this machine's apt sources name, because no image registry can be reached.
set -euo pipefail
cd "$(dirname "$0")/.."

test_runtimes=""
for arg in "$@"; do
  case "$arg" in
    --test-runtimes) test_runtimes=1 ;;
    *) echo "usage: $0 [--test-runtimes]" >&2; exit 2 ;;
  esac
done

# The image build needs tooltree's dependencies (docker-py): .venv's interpreter when there is one.
if [ -x .venv/bin/python ]; then PYTHON="${PYTHON:-.venv/bin/python}"; else PYTHON="${PYTHON:-python3}"; fi
log() { echo "docker-setup: $*" >&2; }

export DEBIAN_FRONTEND=noninteractive
updated=""
apt_install() {
  [ -n "$updated" ] || { apt-get -o Acquire::Retries=5 update -qq; updated=1; }
  apt-get -o Acquire::Retries=5 install -y -qq "$@" >/dev/null
}
if ! command -v dockerd >/dev/null 2>&1; then
  log "installing docker.io"
  apt_install --no-install-recommends docker.io
fi
if ! command -v mmdebstrap >/dev/null 2>&1; then
  log "installing mmdebstrap"
  apt_install mmdebstrap
fi

if ! command -v runsc >/dev/null 2>&1; then
  log "installing runsc (gVisor)"
  apt_install runsc
fi
# Register runsc before the engine starts (or reload a running engine): SECURITY.md, "gVisor". Also as
# "runsc-alias", the way `runsc install --runtime runsc-kvm` adds names: tooltree tells gVisor by the binary the
# engine registered, not by the name (tests/sandbox/test_gvisor_names.py). Entries already there are kept.
daemon_json=/etc/docker/daemon.json
loosened=""
last_runtime=runsc-alias
if [ -n "$test_runtimes" ]; then
  loosened=/usr/local/libexec/tooltree/runc-loosened
  last_runtime=tooltree-test-mounts
  mkdir -p "$(dirname "$loosened")"
  # With the system's interpreter: the engine runs it with its own PATH, long after this clone may be gone.
  host_python=$(command -v /usr/bin/python3 || command -v python3)
  { echo "#!$host_python"; tail -n +2 .ci/runc-loosened; } > "$loosened.new"
  chmod 0755 "$loosened.new" && mv "$loosened.new" "$loosened"
fi
if ! grep -q '"runsc"' "$daemon_json" 2>/dev/null || ! grep -q '"runsc-alias"' "$daemon_json" 2>/dev/null \
    || ! grep -q "\"$last_runtime\"" "$daemon_json" 2>/dev/null; then
  log "registering runsc, runsc-alias${test_runtimes:+ and the test runtimes} in $daemon_json"
  mkdir -p /etc/docker
  "$PYTHON" - "$daemon_json" "$(command -v runsc)" "$loosened" <<'PY'
import json, sys
from pathlib import Path
path, runsc, loosened = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
config = json.loads(path.read_text(encoding="utf-8")) if path.is_file() and path.read_text(encoding="utf-8").strip() else {}
for name in ("runsc", "runsc-alias"):
    config.setdefault("runtimes", {}).setdefault(name, {"path": runsc, "runtimeArgs": ["--network=none"]})
if loosened:
    for what, name in (("limits", "unlimited"), ("seccomp", "seccomp"), ("network", "network"), ("mounts", "mounts")):
        config["runtimes"][f"tooltree-test-{name}"] = {"path": loosened, "runtimeArgs": [f"--tooltree-loosen={what}"]}
path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
PY
  if pid=$(pidof dockerd); then
    kill -HUP $pid  # runtimes are reloaded without a restart
    for _ in $(seq 1 30); do
      docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q "\"$last_runtime\"" && break
      sleep 1
    done
  fi
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
log "engine $(docker version --format '{{.Server.Version}}'), runtimes $(docker info --format '{{json .Runtimes}}' | "$PYTHON" -c 'import json,sys; print(" ".join(sorted(json.load(sys.stdin))))')"

PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m sandbox.image build --offline-base
