#!/bin/sh
# The container image's entrypoint: the first argument picks the component (docs/deployment.md).
# Each component is configured by its environment only; nothing here sets a default secret.
set -eu
cd /app

usage() {
  cat <<'EOF'
Usage: <image> <component> [options]

Components:
  standalone   every service in one process: chaos-core serve [--host H] [--port P] (the default);
               its data directory CHAOS_CORE_DATA_DIR=/var/lib/chaos-core is a volume to mount
  migrate      apply every service's migrations to DATABASE_URL once and exit
  edge         MCP over Streamable HTTP (PORT 3000) in front of the gRPC services
  cognition    gRPC, PORT 50053
  policy       gRPC, PORT 50051 (the tenant admin API on CHAOS_CORE_ADMIN_PORT, 50056)
  memory       gRPC, PORT 50052
  ledger       gRPC, PORT 50054
  council      gRPC, PORT 50055
  bridge       [--host H] [--port P] [--token-file F] -- CMD ARGS: a stdio MCP server over
               Streamable HTTP, one process per session (an upstream's own Deployment)
  chaos-core   the operator command line: chaos-core ledger verify, policy show, approvals,
               tenants, keys ...

Every component binds HOST (default 127.0.0.1). On a non-loopback HOST the edge and standalone
require a credential on every request: a key of CHAOS_CORE_API_KEYS_FILE or of the tenant
registry (chaos-core keys create), or an access token of CHAOS_CORE_OAUTH_ISSUER.
EOF
}

component=${1:-standalone}
[ "$#" -eq 0 ] || shift
case "$component" in
  edge | cognition | policy | ledger | memory | council)
    if [ "$#" -gt 0 ]; then
      echo "chaos-core image: $component takes no arguments; it is configured by its environment (docs/deployment.md)" >&2
      exit 2
    fi
    # The telemetry preload first, so pg, ioredis, http and grpc-js load instrumented.
    exec node --import @chaos-core/kit/telemetry "services/$component/dist/main.js"
    ;;
  # The standalone's data directory (and so the operator commands' default) is the volume's mount
  # point; the services run alone never get one, so none of them falls back to embedded stores.
  standalone)
    export CHAOS_CORE_DATA_DIR="${CHAOS_CORE_DATA_DIR:-/var/lib/chaos-core}"
    exec node services/standalone/bin/chaos-core.js serve "$@"
    ;;
  migrate) exec node services/standalone/bin/chaos-core.js migrate "$@" ;;
  # A stdio upstream served over Streamable HTTP in its own pod (docs/federation-platform.md §2).
  bridge) exec node services/standalone/bin/chaos-core.js bridge "$@" ;;
  chaos-core)
    export CHAOS_CORE_DATA_DIR="${CHAOS_CORE_DATA_DIR:-/var/lib/chaos-core}"
    exec node services/standalone/bin/chaos-core.js "$@"
    ;;
  help | --help | -h) usage ;;
  *)
    echo "chaos-core image: unknown component \"$component\"" >&2
    usage >&2
    exit 2
    ;;
esac
