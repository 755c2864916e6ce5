#!/usr/bin/env bash
# Property-based fuzzing of the broker API: schemathesis (pinned in requirements.txt) with
# every check, all phases, against the real perpsim binary on loopback, every request
# D2-signed by fuzz/signing_hook.py. Zero failures or it exits non-zero.
#
#   bash tests/sdk/fuzz.sh [max examples per operation, default 100] [seed]
#
# CI runs it with a small budget from run.sh. The configuration (what each operation may
# answer to valid data, and why) is fuzz/schemathesis.toml.
set -euo pipefail
source "$(dirname "$0")/common.sh"  # sets $here and $root, and works in $here
fuzz_prelude "$@"
# The fuzzer sends far more than a broker's default 100 requests/s, and hundreds of requests
# with broken credentials from one address (each must answer 401, not the 429 an address past
# its failures gets); the manual clock keeps every transfer pending, so nothing moves under it
# between a request and its check.
start_server --rate-limit 100000 --rate-burst 100000 \
  --auth-failure-rate 100000 --auth-failure-burst 100000

cd fuzz
# Real resources for the generated requests to address (see schemathesis.toml).
eval "$("$here/.venv/bin/python" seed.py "http://$address" "$work/data")"
export PERPSIM_CUSTOMER PERPSIM_REFERENCE PERPSIM_POSITION PERPSIM_TRADE PERPSIM_SYMBOL

echo "schemathesis: $examples examples per operation, seed $seed"
SCHEMATHESIS_HOOKS=signing_hook PYTHONPATH=. PERPSIM_KEY="$work/data/demo-broker.key" \
  "$here/.venv/bin/schemathesis" --config-file schemathesis.toml run "$root/openapi/broker.json" \
  --url "http://$address" --checks all --phases examples,coverage,fuzzing,stateful \
  --max-examples "$examples" --seed "$seed" --no-color "${@:3}"
