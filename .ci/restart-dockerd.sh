#!/usr/bin/env bash
# Restart the Docker engine that .ci/docker-setup.sh started (used by the engine-restart fault test).
set -euo pipefail
if pids=$(pidof dockerd); then
  kill $pids
  for _ in $(seq 1 60); do pidof dockerd >/dev/null || break; sleep 0.5; done
fi
setsid nohup dockerd >>/tmp/dockerd.log 2>&1 < /dev/null &
for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && exit 0; sleep 1; done
echo "restart-dockerd: the engine did not come back within 60 s" >&2
exit 1
