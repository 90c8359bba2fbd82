#!/usr/bin/env bash
# Runs Chaos Core the way Kubernetes does, on one machine: policy, memory, cognition and the edge as
# separate processes talking gRPC on 127.0.0.1, on the Postgres in DATABASE_URL (and Redis in
# REDIS_URL, if set). A fresh random call-context key is made for this run: there is no default.
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/chaoscore deploy/local/distributed.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${DATABASE_URL:?set DATABASE_URL to a Postgres database}"
npm run build --silent
export CHAOS_CORE_CONTEXT_KEY
CHAOS_CORE_CONTEXT_KEY=$(node -e 'console.log(require("crypto").randomBytes(32).toString("hex"))')
preload=(--import @chaos-core/kit/telemetry)

pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
PORT=50051 node "${preload[@]}" services/policy/dist/main.js & pids+=($!)
PORT=50052 node "${preload[@]}" services/memory/dist/main.js & pids+=($!)
export POLICY_ADDR=127.0.0.1:50051 MEMORY_ADDR=127.0.0.1:50052
PORT=50053 node "${preload[@]}" services/cognition/dist/main.js & pids+=($!)
COGNITION_ADDR=127.0.0.1:50053 PORT="${PORT:-3000}" \
  node "${preload[@]}" services/edge/dist/main.js & pids+=($!)
echo "edge: http://127.0.0.1:${PORT:-3000}/mcp (Ctrl-C stops every process)"
wait -n
