#!/usr/bin/env bash
# Install the MCP clients that the serve tests drive and whose config files tooltree reads (pinned), into a folder
# of their own.
#
#   scripts/install-real-clients.sh          # install-real-servers.sh (make real-servers) runs it too
#
# Layout under $TOOLTREE_REAL_SERVERS/clients (default: <repo>/.real-servers/clients):
#   node_modules/.bin/mcp-inspector                         @modelcontextprotocol/inspector (its --cli mode)
#   node_modules/@anthropic-ai/claude-code-<platform>/claude  Claude Code's native binary, from its platform package
#   node_modules/.bin/gemini                                @google/gemini-cli (one bundled script, run by node)
#   node_modules/.bin/codex                                 @openai/codex (a launcher of the binary in its platform
#                                                           package, @openai/codex-<platform>)
#   .stamp                                                  hash of the pins; unchanged pins skip the install
#
# npm ci from tests/real_servers/clients/package-lock.json with --ignore-scripts: Claude Code's postinstall only
# copies the platform binary over a placeholder, so the tests launch the binary from its package instead; Gemini
# CLI's optional native modules (node-pty, keytar) stay unbuilt, which its `mcp` commands do not need. Its own
# stamp, so changing these pins never reinstalls the servers (and the other way round).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pins="$repo/tests/real_servers/clients"
dest="${TOOLTREE_REAL_SERVERS:-$repo/.real-servers}/clients"

say() { printf 'real-clients: %s\n' "$*"; }
die() {
    printf 'real-clients: error: %s\n' "$*" >&2
    exit 1
}
command -v node >/dev/null 2>&1 || die "'node' not found on PATH: install Node.js >= 20"
command -v npm >/dev/null 2>&1 || die "'npm' not found on PATH: install npm"
for f in package.json package-lock.json; do
    [[ -f "$pins/$f" ]] || die "missing pin file $pins/$f"
done
mkdir -p "$dest"
stamp_value="$({ cat "$pins/package.json" "$pins/package-lock.json" "${BASH_SOURCE[0]}"; node --version; } | sha256sum | cut -d' ' -f1)"

bins_present() {
    local bin
    for bin in mcp-inspector gemini codex; do
        [[ -x "$dest/node_modules/.bin/$bin" ]] || return 1
    done
    compgen -G "$dest/node_modules/@anthropic-ai/claude-code-*/claude" >/dev/null || return 1
    compgen -G "$dest/node_modules/@openai/codex-*/vendor/*/bin/codex" >/dev/null
}

if [[ -f "$dest/.stamp" && "$(cat "$dest/.stamp")" == "$stamp_value" ]] && bins_present; then
    say "up to date in $dest"
    exit 0
fi
started=$SECONDS
say "npm: @modelcontextprotocol/inspector, @anthropic-ai/claude-code, @google/gemini-cli, @openai/codex from" \
    "$pins/package-lock.json into $dest"
rm -f "$dest/.stamp"
rm -rf "$dest/node_modules"
cp "$pins/package.json" "$pins/package-lock.json" "$dest/"
npm ci --prefix "$dest" --no-audit --no-fund --ignore-scripts --loglevel=error
bins_present || die "install finished but mcp-inspector, gemini, codex or a native binary is missing under $dest"
printf '%s\n' "$stamp_value" >"$dest/.stamp"
say "installed in $((SECONDS - started)) s into $dest"
