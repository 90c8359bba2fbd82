#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance, pinned below) against
# `chaos-core serve` at protocol revisions 2025-11-25 and 2026-07-28, both served on its one /mcp
# endpoint (docs/protocol.md §12). The suite needs
# Node 22 while the project stays on Node >= 20, so a Node 22 binary comes from the npm registry
# (node-linux-<arch>) into .cache/node22 and the suite into its own scratch folder,
# .cache/conformance; both are fetched once and reused while their versions match.
#
#   bash scripts/ci/conformance.sh             prepare, start `chaos-core serve` (the built CLI) on a
#                                              free port with a temporary data directory, run every
#                                              listed scenario of both revisions, stop the server
#   bash scripts/ci/conformance.sh --prepare   only fetch and install into .cache/ (skipped when there)
#   bash scripts/ci/conformance.sh --check     exit 0 when .cache/ holds both at these versions
#   bash scripts/ci/conformance.sh --url URL [--spec-version REV] [--scenario NAME | --requirements]
#                                              run against a server already listening at URL: every
#                                              listed scenario of REV (2025-11-25 by default) and then
#                                              REV's requirement set, or NAME alone, or the
#                                              requirement set alone (needs --prepare first)
#
# The scenarios, per revision REV: those in test/conformance/scenarios.REV.txt are protocol
# scenarios, where every check must pass without a warning; those named in
# test/conformance/expected-failures.REV.yaml need the suite's own fixtures, and there only
# the listed checks may fail (the runner also fails on a listed check that passes).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

CONFORMANCE_VERSION=0.2.0-alpha.12
SPECS=(2025-11-25 2026-07-28)

CACHE=$ROOT/.cache
CONFORMANCE_DIR=$CACHE/conformance
SUITE=$CONFORMANCE_DIR/node_modules/@modelcontextprotocol/conformance
PREPARE_HINT="run 'bash scripts/ci/conformance.sh --prepare'"
# Node 22 keeps the suite's compiled code here: each scenario is a fresh process.
export NODE_COMPILE_CACHE=$CACHE/compile-cache

die() {
  echo "conformance: $*" >&2
  exit 1
}

# Node 22 (NODE22_VERSION, NODE22_DIR, NODE22, node22_ready, prepare_node22), shared with image.sh.
# shellcheck source=scripts/ci/node22.sh disable=SC1091
source "$ROOT/scripts/ci/node22.sh"

usage() {
  sed -n '9,18p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit "${1:-2}"
}

# Selects the revision the lists and the runs below are for.
use_spec() {
  member "$1" "${SPECS[@]}" || die "unknown --spec-version '$1' (one of: ${SPECS[*]})"
  SPEC=$1
  PROTOCOL_LIST=test/conformance/scenarios.$SPEC.txt
  BASELINE=test/conformance/expected-failures.$SPEC.yaml
}

# Read without starting a node: the test runs the script once per scenario.
suite_ready() {
  node22_ready && [ -f "$SUITE/package.json" ] && grep -Fq "\"version\": \"$CONFORMANCE_VERSION\"" "$SUITE/package.json"
}

prepare_suite() {
  if suite_ready; then
    echo "conformance: @modelcontextprotocol/conformance@$CONFORMANCE_VERSION already in .cache/conformance"
    return
  fi
  echo "conformance: installing @modelcontextprotocol/conformance@$CONFORMANCE_VERSION into .cache/conformance"
  local tmp
  tmp=$(mktemp -d "$CACHE/conformance.XXXXXX")
  # Its own package.json, so nothing reaches the project's dependencies or lockfile.
  printf '{\n  "name": "chaos-core-conformance-scratch",\n  "private": true,\n  "description": "Written by scripts/ci/conformance.sh"\n}\n' >"$tmp/package.json"
  # npm runs on Node 22 here, so the suite's engines (node >= 22) are met.
  PATH="$NODE22_DIR/bin:$PATH" npm install --prefix "$tmp" --save-exact --ignore-scripts --no-audit --no-fund \
    --loglevel=error "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" ||
    { rm -rf "$tmp"; die "npm install @modelcontextprotocol/conformance@$CONFORMANCE_VERSION failed"; }
  rm -rf "$CONFORMANCE_DIR"
  mv "$tmp" "$CONFORMANCE_DIR"
  suite_ready || die "the suite in .cache/conformance is not version $CONFORMANCE_VERSION"
}

# The lists, read once: PROTOCOL (without comments and blank lines), ENTRIES ("scenario:check" per
# entry of the baseline's server list) and FIXTURE (the scenarios those entries name).
read_lists() {
  local line entry
  PROTOCOL=() ENTRIES=() FIXTURE=()
  while IFS= read -r line; do
    line=${line%%#*}
    line=${line//[[:space:]]/}
    [ -z "$line" ] || PROTOCOL+=("$line")
  done <"$PROTOCOL_LIST"
  while IFS= read -r line; do
    case "$line" in
      "  - "*" # needs "*) ;;
      "  - "*) die "$BASELINE: '$line' has no '# needs <fixture>' comment" ;;
      *) continue ;;
    esac
    entry=${line#  - }
    entry=${entry%% *}
    # A protocol scenario is never baselined: it is made to pass instead.
    if member "${entry%%:*}" "${PROTOCOL[@]}"; then
      die "$BASELINE lists $entry, but ${entry%%:*} is a protocol scenario ($PROTOCOL_LIST)"
    fi
    ENTRIES+=("$entry")
    member "${entry%%:*}" "${FIXTURE[@]}" || FIXTURE+=("${entry%%:*}")
  done <"$BASELINE"
}

member() {
  local needle=$1 item
  shift
  for item in "$@"; do [ "$item" = "$needle" ] && return 0; done
  return 1
}

# Runs one scenario and decides it: the runner's own exit code (with the baseline), and besides it
# that the scenario really ran at this revision and, for a protocol scenario, that every check
# passed; for a fixture scenario, that each of its listed checks was among the expected failures.
run_scenario() {
  local url=$1 name=$2 kind out code=0 entry
  if member "$name" "${PROTOCOL[@]}"; then
    kind=protocol
  elif member "$name" "${FIXTURE[@]}"; then
    kind=fixture
  else
    die "$name is in neither $PROTOCOL_LIST nor $BASELINE"
  fi
  echo "=== $name ($kind)"
  out=$("$NODE22" "$SUITE/dist/index.js" server --url "$url" --spec-version "$SPEC" --scenario "$name" \
    --expected-failures "$BASELINE" 2>&1) || code=$?
  # The suite colours its output whatever it writes to; the verdicts below read plain text.
  # shellcheck disable=SC2001 # a regex, which ${out//…} does not take
  out=$(sed 's/\x1b\[[0-9;]*m//g' <<<"$out")
  echo "$out"
  if [ "$code" -ne 0 ]; then
    echo "::: $name: FAILED (the suite exited $code)"
    return 1
  fi
  if grep -q '^SKIPPED:' <<<"$out"; then
    echo "::: $name: FAILED (not run at $SPEC)"
    return 1
  fi
  if [ "$kind" = protocol ]; then
    if ! grep -Eq '^Passed: ([1-9][0-9]*)/\1, 0 failed, 0 warnings$' <<<"$out"; then
      echo "::: $name: FAILED (not every check passed)"
      return 1
    fi
  else
    for entry in "${ENTRIES[@]}"; do
      [ "${entry%%:*}" = "$name" ] || continue
      if ! grep -Fxq "  ~ $entry" <<<"$out"; then
        echo "::: $name: FAILED ($entry was not among the expected failures: check id renamed?)"
        return 1
      fi
    done
    # The runner lets a warning pass anywhere; here only a listed check may warn (or fail), so a
    # protocol check inside a fixture scenario (server-sse-polling's priming event) must pass.
    local check
    while IFS= read -r check; do
      [ -n "$check" ] || continue
      if ! member "$name:$check" "${ENTRIES[@]}"; then
        echo "::: $name: FAILED (check $check warned or failed, and it is no listed fixture check)"
        return 1
      fi
    done < <(sed -nE 's/^[^[]*\[([A-Za-z0-9_.:-]+) *\] (WARNING|FAILURE) .*/\1/p' <<<"$out")
  fi
  echo "::: $name: ok"
}

# Runs the revision's requirement set as the suite freezes it at the revision's release
# (`--requirements REV`: exactly the scenarios REV requires, extensions and pending ones reported
# but not scored) against the same baseline: every scored failure must be a listed fixture check,
# and no listed check may pass. It proves that the scenario lists above leave no required
# scenario out.
run_requirements() {
  local url=$1 out code=0
  echo "=== requirement set $SPEC"
  out=$("$NODE22" "$SUITE/dist/index.js" server --url "$url" --requirements "$SPEC" \
    --expected-failures "$BASELINE" 2>&1) || code=$?
  # shellcheck disable=SC2001 # a regex, which ${out//…} does not take
  out=$(sed 's/\x1b\[[0-9;]*m//g' <<<"$out")
  echo "$out"
  if [ "$code" -ne 0 ] || ! grep -q '^Baseline check passed' <<<"$out"; then
    echo "::: requirements $SPEC: FAILED (the suite exited $code)"
    return 1
  fi
  echo "::: requirements $SPEC: ok"
}

run_all() {
  local url=$1 failed=0 name
  for name in "${PROTOCOL[@]}" "${FIXTURE[@]}"; do
    run_scenario "$url" "$name" || failed=$((failed + 1))
  done
  echo "conformance $SPEC: $((${#PROTOCOL[@]} + ${#FIXTURE[@]} - failed)) of $((${#PROTOCOL[@]} + ${#FIXTURE[@]})) scenarios as expected (${#PROTOCOL[@]} protocol, ${#FIXTURE[@]} fixture)"
  run_requirements "$url" || failed=$((failed + 1))
  [ "$failed" -eq 0 ]
}

require_prepared() {
  suite_ready || die "Node $NODE22_VERSION and @modelcontextprotocol/conformance@$CONFORMANCE_VERSION are not in .cache/: $PREPARE_HINT"
}

SERVE_PID=
WORK=
stop_serve() {
  if [ -n "$SERVE_PID" ] && kill -0 "$SERVE_PID" 2>/dev/null; then
    kill "$SERVE_PID" 2>/dev/null || true
    wait "$SERVE_PID" 2>/dev/null || true
  fi
  [ -z "$WORK" ] || rm -rf "$WORK"
}

# `chaos-core serve` with embedded stores in a temporary data directory, on an ephemeral port
# (PORT=0: the kernel picks a free one, and serve prints its endpoint). It runs in the temporary
# directory, so no .env of the checkout reaches it, and without the variables that would point it
# at shared Postgres, Redis or API keys.
start_serve() {
  [ -f "$ROOT/services/standalone/dist/cli.js" ] || die "chaos-core is not built: run 'npm run build' first"
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/chaos-core-conformance.XXXXXX")
  trap stop_serve EXIT
  trap 'exit 130' INT TERM
  mkdir -p "$WORK/home" "$WORK/data"
  (cd "$WORK" && exec env -u DATABASE_URL -u REDIS_URL -u CHAOS_CORE_API_KEYS_FILE -u HOST \
    HOME="$WORK/home" XDG_DATA_HOME="$WORK/home/.local/share" CHAOS_CORE_DATA_DIR="$WORK/data" \
    PORT=0 LOG_LEVEL=warn node "$ROOT/services/standalone/bin/chaos-core.js" serve) \
    >"$WORK/serve.out" 2>"$WORK/serve.err" &
  SERVE_PID=$!
  local url=
  for _ in $(seq 1 600); do
    url=$(grep -Eo 'http://[0-9.]+:[0-9]+/mcp' "$WORK/serve.out" | head -n 1 || true)
    [ -n "$url" ] && break
    kill -0 "$SERVE_PID" 2>/dev/null || { cat "$WORK/serve.err" >&2; die "chaos-core serve exited before it listened"; }
    sleep 0.1
  done
  [ -n "$url" ] || { cat "$WORK/serve.err" >&2; die "chaos-core serve did not print its endpoint within 60 s"; }
  echo "conformance: chaos-core serve at $url (data dir $WORK/data)"
  SERVE_URL=$url
}

mode=serve url='' scenario='' spec=2025-11-25 spec_given='' requirements=''
while [ $# -gt 0 ]; do
  case "$1" in
    --prepare) mode=prepare ;;
    --check) mode=check ;;
    --url) [ -n "${2:-}" ] || usage; mode=url url=$2; shift ;;
    --scenario) [ -n "${2:-}" ] || usage; scenario=$2; shift ;;
    --requirements) requirements=1 ;;
    --spec-version) [ -n "${2:-}" ] || usage; spec=$2; spec_given=1; shift ;;
    -h | --help) usage 0 ;;
    *) echo "conformance: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
[ -z "$scenario" ] || [ "$mode" = url ] || die "--scenario needs --url"
[ -z "$requirements" ] || [ "$mode" = url ] || die "--requirements needs --url"
[ -z "$requirements" ] || [ -z "$scenario" ] || die "--requirements and --scenario exclude each other"
[ -z "$spec_given" ] || [ "$mode" = url ] || die "--spec-version needs --url"
use_spec "$spec"

case "$mode" in
  prepare)
    prepare_node22 conformance
    prepare_suite
    ;;
  check)
    require_prepared
    ;;
  url)
    require_prepared
    read_lists
    if [ -n "$scenario" ]; then
      run_scenario "$url" "$scenario"
    elif [ -n "$requirements" ]; then
      run_requirements "$url"
    else
      run_all "$url"
    fi
    ;;
  serve)
    prepare_node22 conformance
    prepare_suite
    start_serve
    failed=0
    for spec in "${SPECS[@]}"; do
      use_spec "$spec"
      read_lists
      run_all "$SERVE_URL" || failed=1
    done
    [ "$failed" -eq 0 ]
    ;;
esac
