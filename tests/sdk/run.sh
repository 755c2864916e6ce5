#!/usr/bin/env bash
# Judges of the OpenAPI documents in openapi/: the OpenAPI specification's own validator
# (openapi-spec-validator, PyPI) and a linter with a recommended ruleset (@redocly/cli, npm),
# each pinned here and installed by this script into tests/sdk/.venv and tests/sdk/node_modules
# (kept between runs, reinstalled when the pins change). Zero errors and zero warnings pass.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$here"

# Python tools, in a venv keyed by the pins.
stamp=".venv/.pins-$(sha256sum requirements.txt | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  rm -rf .venv
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
  touch "$stamp"
fi

# Node tools, exactly as package-lock.json pins them.
lockstamp="node_modules/.pins-$(sha256sum package-lock.json | cut -c1-16)"
if [ ! -f "$lockstamp" ]; then
  npm ci --no-audit --no-fund --silent
  touch "$lockstamp"
fi

failed=0
lint="$(mktemp)"
trap 'rm -f "$lint"' EXIT
for doc in broker admin; do
  file="$root/openapi/$doc.json"
  if .venv/bin/openapi-spec-validator "$file"; then :; else failed=1; fi
  # --max-problems keeps the report whole; warnings fail too (the config waives with reasons).
  if ./node_modules/.bin/redocly lint "$file" --config redocly.yaml --max-problems 1000 \
      --format stylish 2>&1 | grep -v '║\|╔\|╚' | tee "$lint" \
      && ! grep -qE '^\s+[0-9]+:[0-9]+\s+(error|warning)' "$lint"; then
    :
  else
    failed=1
  fi
done
if [ "$failed" -ne 0 ]; then
  echo "OpenAPI documents: 0 passed, 1 failed"
  exit 1
fi
echo "OpenAPI documents: 1 passed, 0 failed"
