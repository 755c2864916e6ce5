# Shared by the scripts of tests/sdk (sourced after `set -euo pipefail`): $here is this folder,
# where they work, and $root the repository's.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$here"

# Runs a command that fetches from a registry up to three times, 10 s apart: one dropped
# connection on a fresh machine is not a failed contract. Says so on stderr when it retries.
with_retries() {
  local try
  for try in 1 2 3; do
    "$@" && return 0
    [ "$try" -lt 3 ] || break
    echo "retrying in 10 s (attempt $try of 3 failed): $*" >&2
    sleep 10
  done
  echo "failed three times: $*" >&2
  return 1
}

# The Python tools, in tests/sdk/.venv keyed by the pins: reinstalled when they change.
ensure_venv() {
  local stamp=".venv/.pins-$(sha256sum requirements.txt | cut -c1-16)"
  if [ ! -f "$stamp" ]; then
    rm -rf .venv
    python3 -m venv .venv
    with_retries .venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
    touch "$stamp"
  fi
}

# The prelude of fuzz.sh and fuzz_admin.sh: the budget and seed from their arguments, the
# tools, and a work directory removed (with the server stopped) on exit.
fuzz_prelude() {
  examples="${1:-100}"
  seed="${2:-$RANDOM}"
  ensure_venv
  work="$(mktemp -d)"
  trap '[ -n "${server:-}" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
}

# Starts the perpsim binary `cargo test --workspace` built (building it if missing) on a
# manual clock in "$work/data", with any extra flags; sets $server (its pid) and $address
# (read from its log).
start_server() {
  start_perpsim --clock manual --start 2026-01-01T00:00:00Z "$@"
}

# The same with only the flags given (the realtime clock of the defaults unless they say).
start_perpsim() {
  local bin="${CARGO_TARGET_DIR:-$root/target}/debug/perpsim"
  [ -x "$bin" ] || (cd "$root" && cargo build --quiet -p perpsim-api --bin perpsim)
  PERPSIM_LOG=info "$bin" serve --listen 127.0.0.1:0 --data-dir "$work/data" "$@" \
    2>"$work/server.log" &
  server=$!
  address=""
  for _ in $(seq 1 200); do
    address="$(grep -o 'address=http://[0-9.:]*' "$work/server.log" | head -1 | cut -d/ -f3 || true)"
    [ -n "$address" ] && break
    sleep 0.05
  done
  [ -n "$address" ] || { cat "$work/server.log"; echo "perpsim did not start"; exit 1; }
}
