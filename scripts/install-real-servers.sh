#!/usr/bin/env bash
# Install the third-party MCP servers that the real_servers tests start, pinned, into a local folder.
#
#   scripts/install-real-servers.sh          # or: make real-servers
#
# Layout under $TOOLTREE_REAL_SERVERS (default: <repo>/.real-servers):
#   node/node_modules/.bin/mcp-server-{everything,filesystem,memory}   npm ci from tests/real_servers/package-lock.json
#   venv/bin/mcp-server-{git,time,fetch}                                pip install -r tests/real_servers/requirements.txt
#   fixtures/files/                                                     a scratch folder for server-filesystem
#   fixtures/git-repo/                                                  a one-commit repository for mcp-server-git
#   state/                                                              where server-memory keeps its knowledge graph
#   .stamp                                                              hash of the pins; unchanged pins skip the install
#   clients/                                                            the MCP clients (scripts/install-real-clients.sh,
#                                                                       its own pins and stamp)
#
# The servers are launched by path, never through npx or uvx, which would ask the registry on every start.
# The Python servers get a venv of their own: their dependency pins may disagree with tooltree's.
# Environment: TOOLTREE_REAL_SERVERS (install folder), PYTHON (interpreter for the venv, default python3).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pins="$repo/tests/real_servers"
dest="${TOOLTREE_REAL_SERVERS:-$repo/.real-servers}"
python="${PYTHON:-python3}"
step="start"

say() { printf 'real-servers: %s\n' "$*"; }
die() {
    printf 'real-servers: error: %s\n' "$*" >&2
    exit 1
}
on_error() {
    local rc=$?
    printf 'real-servers: error: step "%s" failed (exit %s); see the output above. Nothing was stamped: rerun to retry.\n' \
        "$step" "$rc" >&2
    exit "$rc"
}
trap on_error ERR

need() { command -v "$1" >/dev/null 2>&1 || die "'$1' not found on PATH: $2"; }

step="check tools"
need node "install Node.js >= 20 (apt-get install nodejs npm)"
need npm "install npm (apt-get install npm)"
need git "install git (apt-get install git)"
need "$python" "install Python >= 3.10 or point PYTHON at one"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
((node_major >= 20)) || die "Node.js >= 20 is needed (the servers' dependencies say so); found $(node --version)"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
    die "Python >= 3.10 is needed for the PyPI servers; $python is $("$python" --version 2>&1)"
mkdir -p "$dest"
dest="$(cd "$dest" && pwd)" # absolute: the config and the venv's scripts embed this path
for f in package.json package-lock.json requirements.txt; do
    [[ -f "$pins/$f" ]] || die "missing pin file $pins/$f"
done

# Everything that decides what gets installed: the pin files, this script, and the two runtimes.
stamp_value="$(
    {
        cat "$pins/package.json" "$pins/package-lock.json" "$pins/requirements.txt" "${BASH_SOURCE[0]}"
        node --version
        "$python" -c 'import sys; print(sys.version)'
    } | sha256sum | cut -d' ' -f1
)"

bins_present() {
    local b
    for b in node/node_modules/.bin/mcp-server-everything node/node_modules/.bin/mcp-server-filesystem \
        node/node_modules/.bin/mcp-server-memory venv/bin/mcp-server-git venv/bin/mcp-server-time \
        venv/bin/mcp-server-fetch; do
        [[ -x "$dest/$b" ]] || return 1
    done
}

make_fixtures() {
    step="fixtures"
    mkdir -p "$dest/state" "$dest/fixtures/files/notes"
    [[ -f "$dest/fixtures/files/hello.txt" ]] || printf 'hello from tooltree\n' >"$dest/fixtures/files/hello.txt"
    [[ -f "$dest/fixtures/files/notes/todo.md" ]] ||
        printf '# To do\n\n- read the tree\n- write a script\n' >"$dest/fixtures/files/notes/todo.md"
    local gitrepo="$dest/fixtures/git-repo"
    if ! git -C "$gitrepo" rev-parse --verify --quiet HEAD >/dev/null 2>&1; then
        say "creating the git fixture $gitrepo"
        rm -rf "$gitrepo"
        mkdir -p "$gitrepo"
        git -C "$gitrepo" init --quiet --initial-branch=main
        printf '# fixture\n\nA repository for mcp-server-git.\n' >"$gitrepo/README.md"
        git -C "$gitrepo" add README.md
        # Identity and signing are fixed here so a developer's global git config cannot break the commit.
        git -C "$gitrepo" -c user.name=tooltree -c user.email=tooltree@example.invalid -c commit.gpgsign=false \
            commit --quiet -m "Initial commit"
    fi
}

if [[ -f "$dest/.stamp" && "$(cat "$dest/.stamp")" == "$stamp_value" ]] && bins_present; then
    make_fixtures
    say "up to date in $dest"
    TOOLTREE_REAL_SERVERS="$dest" "$repo/scripts/install-real-clients.sh"
    exit 0
fi

started=$SECONDS
say "installing into $dest"
rm -f "$dest/.stamp"

step="npm ci"
say "npm: @modelcontextprotocol/server-{everything,filesystem,memory} from $pins/package-lock.json"
rm -rf "$dest/node"
mkdir -p "$dest/node"
cp "$pins/package.json" "$pins/package-lock.json" "$dest/node/"
# None of the locked packages has an install script; refusing them keeps the install to plain files.
npm ci --prefix "$dest/node" --no-audit --no-fund --ignore-scripts --loglevel=warn

step="python venv"
say "pip: mcp-server-{git,time,fetch} from $pins/requirements.txt into $dest/venv ($("$python" --version 2>&1))"
rm -rf "$dest/venv"
"$python" -m venv "$dest/venv"
step="pip install"
"$dest/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$pins/requirements.txt"
step="pip check"
"$dest/venv/bin/python" -m pip check --disable-pip-version-check >/dev/null

step="verify"
bins_present || die "install finished but a server binary is missing under $dest"

make_fixtures
step="stamp"
printf '%s\n' "$stamp_value" >"$dest/.stamp"
say "installed in $((SECONDS - started)) s into $dest"
step="clients"
TOOLTREE_REAL_SERVERS="$dest" "$repo/scripts/install-real-clients.sh"
