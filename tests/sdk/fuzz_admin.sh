#!/usr/bin/env bash
# Property-based fuzzing of the admin API (issue 35 item 5): schemathesis (pinned in
# requirements.txt) with every check, all phases, against the real perpsim binary on loopback
# with the living market of the defaults, the admin token on every request. No input may
# answer a 5xx, drop the connection or leave the venue unable to answer: zero failures, or
# it exits non-zero.
#
#   bash tests/sdk/fuzz_admin.sh [max examples per operation, default 100] [seed]
#
# The clock is realtime, so a clock advance answers 409 CONFLICT once its body has passed
# every check (bounded to 366 days, refused with 400 beyond): no generated advance runs for
# minutes. CI runs it with a small budget from run.sh; what each operation may answer to
# valid data, and why, is fuzz/admin.toml.
set -euo pipefail
source "$(dirname "$0")/common.sh"  # sets $here and $root, and works in $here
fuzz_prelude "$@"
# Deposits stay pending for an hour, so a transfer exists for cancelTransfer to address.
start_perpsim --transfer-delay 3600

cd fuzz
eval "$("$here/.venv/bin/python" seed_admin.py "http://$address" "$work/data")"
export PERPSIM_BROKER PERPSIM_CUSTOMER PERPSIM_TRANSFER PERPSIM_SYMBOL

echo "schemathesis (admin): $examples examples per operation, seed $seed"
"$here/.venv/bin/schemathesis" --config-file admin.toml run "$root/openapi/admin.json" \
  --url "http://$address" --header "Authorization: Bearer $(cat "$work/data/admin.token")" \
  --checks all --phases examples,coverage,fuzzing,stateful \
  --max-examples "$examples" --seed "$seed" --no-color "${@:3}"
# The venue still answers after everything the run sent.
curl -sf "http://$address/healthz" >/dev/null || { echo "the server stopped answering"; exit 1; }
kill -0 "$server" 2>/dev/null || { cat "$work/server.log"; echo "the server died"; exit 1; }
