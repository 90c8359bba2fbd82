#!/usr/bin/env bash
# Runs Chaos Core the way Kubernetes does, on one machine: policy, memory, ledger, cognition, council and the edge as
# separate processes talking gRPC on 127.0.0.1, on the Postgres in DATABASE_URL (and Redis in
# REDIS_URL, if set). A fresh random call-context key is made for this run: there is no default.
# The ledger signs with the keyring in CHAOS_CORE_LEDGER_KEYS_FILE; without one, a keyring is
# generated once into ./data/ledger-keyring.json (back it up: it signs receipts and checkpoints).
# The edge seals multi-round-trip requestState with the keyring in CHAOS_CORE_MRTR_KEYS_FILE;
# without one, a keyring is generated once into ./data/mrtr-keyring.json (every edge replica
# that serves the same clients mounts the same file).
# As the chart does, the schema is migrated once first (`chaos-core migrate`, the chart's hook Job)
# and the services only verify it (CHAOS_CORE_MIGRATE=verify); SIGTERM drains within 25 s.
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/chaoscore deploy/local/distributed.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${DATABASE_URL:?set DATABASE_URL to a Postgres database}"
npm run build --silent
export CHAOS_CORE_CONTEXT_KEY
CHAOS_CORE_CONTEXT_KEY=$(node -e 'console.log(require("crypto").randomBytes(32).toString("hex"))')
preload=(--import @chaos-core/kit/telemetry)
node services/standalone/bin/chaos-core.js migrate --database-url "$DATABASE_URL"
export CHAOS_CORE_MIGRATE=verify CHAOS_CORE_SHUTDOWN_GRACE_SECONDS="${CHAOS_CORE_SHUTDOWN_GRACE_SECONDS:-25}"

pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
PORT=50051 node "${preload[@]}" services/policy/dist/main.js & pids+=($!)
PORT=50052 node "${preload[@]}" services/memory/dist/main.js & pids+=($!)
if [ -z "${CHAOS_CORE_LEDGER_KEYS_FILE:-}" ]; then
  CHAOS_CORE_LEDGER_KEYS_FILE="$PWD/data/ledger-keyring.json"
  if [ ! -f "$CHAOS_CORE_LEDGER_KEYS_FILE" ]; then
    mkdir -p data
    node --input-type=module -e 'const { generateKeyringFile } = await import("@chaos-core/ledger"); console.log("generated ledger key", await generateKeyringFile(process.argv[1]), "in", process.argv[1]);' "$CHAOS_CORE_LEDGER_KEYS_FILE"
  fi
fi
export CHAOS_CORE_LEDGER_KEYS_FILE
# The ledger asks the policy service which approval channels may answer a spend or a receipt.
export POLICY_ADDR=127.0.0.1:50051 MEMORY_ADDR=127.0.0.1:50052 LEDGER_ADDR=127.0.0.1:50054
PORT=50054 node "${preload[@]}" services/ledger/dist/main.js & pids+=($!)
PORT=50053 node "${preload[@]}" services/cognition/dist/main.js & pids+=($!)
PORT=50055 node "${preload[@]}" services/council/dist/main.js & pids+=($!)
if [ -z "${CHAOS_CORE_MRTR_KEYS_FILE:-}" ]; then
  CHAOS_CORE_MRTR_KEYS_FILE="$PWD/data/mrtr-keyring.json"
  if [ ! -f "$CHAOS_CORE_MRTR_KEYS_FILE" ]; then
    mkdir -p data
    node --input-type=module -e 'const { generateMrtrKeyringFile } = await import("@chaos-core/edge"); console.log("generated requestState key", await generateMrtrKeyringFile(process.argv[1]), "in", process.argv[1]);' "$CHAOS_CORE_MRTR_KEYS_FILE"
  fi
fi
export CHAOS_CORE_MRTR_KEYS_FILE
COGNITION_ADDR=127.0.0.1:50053 COUNCIL_ADDR=127.0.0.1:50055 PORT="${PORT:-3000}" \
  node "${preload[@]}" services/edge/dist/main.js & pids+=($!)
echo "edge: http://127.0.0.1:${PORT:-3000}/mcp (Ctrl-C stops every process)"
wait -n
