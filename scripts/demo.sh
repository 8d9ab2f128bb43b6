#!/usr/bin/env bash
# `make demo`: generate the stub tree for the bundled sample servers, show what a model sees,
# search it, and (when a Docker engine answers) run a script in the sandbox against the real servers.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
CONFIG=${CONFIG:-examples/tooltree.yaml}
TREE=${TREE:-tree}

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. generate-tree: every tool of the sample servers becomes a typed stub ($CONFIG → $TREE/)"
tooltree generate-tree --config "$CONFIG" --out "$TREE"

step "2. what the model reads first: $TREE/servers/INDEX.md"
cat "$TREE/servers/INDEX.md"

step "3. one server's README, then the one stub the task needs"
cat "$TREE/servers/crm/README.md"
echo
sed -n '/^def /,/^    """$/p' "$TREE/servers/crm/list_leads.py" | head -30

step "4. a rerun with nothing changed writes nothing; --check confirms the tree matches the servers"
tooltree generate-tree --config "$CONFIG" --out "$TREE" --check

if tooltree search --help >/dev/null 2>&1; then
  step "5. search the tree"
  tooltree search "meeting transcript from the pipeline review" --tree "$TREE" --limit 3
fi

if ! docker info >/dev/null 2>&1; then
  step "6. sandbox: skipped — no Docker engine answers"
  echo "Start one (on Debian as root: .ci/docker-setup.sh), then run 'make demo' again to see a script"
  echo "pull 10,000 CRM leads inside the sandbox and print only the five biggest."
  exit 0
fi

step "6. the sandbox image (built once; its base comes from Debian packages when no registry answers)"
tooltree image build --config "$CONFIG"

step "7. a script in the sandbox: 10,000 leads stay inside, five lines come out (examples/top_leads.py)"
cat examples/top_leads.py
echo
tooltree exec examples/top_leads.py --config "$CONFIG" --tree "$TREE"
