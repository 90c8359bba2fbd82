#!/usr/bin/env bash
# Runs Chaos Core the way the Helm chart does, on one machine: `chaos-core migrate` once (the
# chart's hook Job), then policy, memory, council, the ledger, cognition and the edge as separate
# processes with exactly the environment the chart gives each pod (deploy/local/topology.mjs; the
# names are checked against `helm template` by test/helm/local-parity.test.ts), on the Postgres in
# DATABASE_URL (and Redis in REDIS_URL, if set). The chart's Secrets are files under
# LOCAL_DIR/secrets/ (default ./data/local-<offset>), made once: the call-context key, an API key
# (the key in `api-key`, its hash in `api-keys.json`), the requestState and ledger keyrings (back
# the ledger's up: it signs receipts and checkpoints). PORT_OFFSET shifts every port (edge 3000,
# policy 50051, memory 50052, cognition 50053, ledger 50054, council 50055) so two topologies run
# side by side. SIGTERM drains within 20 s, as in the chart (TERMINATION_GRACE_PERIOD_SECONDS and
# PRESTOP_SECONDS are the chart's lifecycle values; the drain gets their difference - 5 s).
# METRICS_PROMETHEUS_PORT=9464 turns the chart's metrics.prometheus on: each process serves
# /metrics on 127.0.0.1 at 9464 + its index (edge 0, cognition 1, policy 2, ledger 3, memory 4,
# council 5) + PORT_OFFSET; with OTEL_EXPORTER_OTLP_ENDPOINT each exports as chaos-core-<component>.
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/chaoscore deploy/local/distributed.sh
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/other PORT_OFFSET=100 deploy/local/distributed.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${DATABASE_URL:?set DATABASE_URL to a Postgres database}"
npm run build --silent
exec node deploy/local/run.mjs
