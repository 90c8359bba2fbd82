// The help texts of `chaos-core tenants` and `chaos-core keys`.

const WHERE = `Where the registry is: --admin-addr HOST:PORT (or CHAOS_CORE_ADMIN_ADDR), a cluster's tenant
admin API (the policy service's CHAOS_CORE_ADMIN_PORT) over gRPC, each call signed with
CHAOS_CORE_CONTEXT_KEY (TLS by CHAOS_CORE_GRPC_TLS_* as the services); else --database-url /
DATABASE_URL directly (with REDIS_URL set as the edges have it, so they hear of each change);
else the data directory (--data-dir, CHAOS_CORE_DATA_DIR, else the per-user one): through the
server running there, or, with none running, in its embedded database. export, delete and
retention reach a tenant's data: through a running server, or with --admin-addr and
MEMORY_ADDR, COUNCIL_ADDR, LEDGER_ADDR, POLICY_ADDR (the services' addresses).
Add --json for one JSON object per answer. Exits 0 when done, 1 when refused, 2 on a usage error.`;

/** The help text of `chaos-core tenants`. */
export const TENANTS_USAGE = `Usage: chaos-core tenants <command> [options]

Commands:
  create <id>    Register a tenant [--name TEXT] [--memory-retention-days N]
                 [--council-retention-days N] [--toolsets core,council,... | all | default]: the
                 toolsets its clients see (core, council, governance, finance-reference); default
                 core,council,governance: finance-reference's synthetic bank tools are served only
                 where it is listed (or all). stdio serves tenant "default"
                 [--rate-limits FILE | none]: its rate limits, one tenant's entry of the rate
                 limits file as JSON ({tenant?, principal?, tool?, tools?}); they win over
                 CHAOS_CORE_RATE_LIMITS_FILE's entry for it, from its next request
                 [--ledger-policy FILE | none]: its spend policies and tool-approval policy,
                 one tenant's section of the ledger policy file as JSON ({spend_policies?,
                 tool_approval?}); each key it sets wins over CHAOS_CORE_LEDGER_POLICY_FILE's
                 for it, from its next call
  list           Every registered tenant, its status and settings
  show <id>      One tenant, with how many of its keys are active
  disable <id>   Refuse the tenant's every call from its next request on (sessions included)
  enable <id>    Serve it again
  settings <id>  Change its settings (the flags of create; unset flags keep their value)
  export <id>    Write its data to --out DIR (default ./<id>-export): tenant.json, policy.json,
                 memory.jsonl, council.jsonl, ledger.jsonl (chaos-core ledger verify --file)
  delete <id>    --confirm <id>: disable it, remove its memory and council sessions, record the
                 deletion in its ledger (which keeps every entry) and revoke its keys
  retention [<id>]  Apply the retention settings now (every tenant, or one); a cluster runs
                 this on a schedule, a standalone server every hour

${WHERE}
`;

/** The help text of `chaos-core keys`. */
export const KEYS_USAGE = `Usage: chaos-core keys <command> --tenant ID [options]

Commands:
  create         Issue an API key: --principal NAME [--role approver,support,…] [--expires-in 30d | 12h | 90m | 45s]
                 The key (cc_<id>_...) is printed once, on stdout; only its SHA-256 is stored.
                 Roles: approver answers approvals; any other name (a lowercase letter, then a-z,
                 0-9, - and _, at most 63) means something only where an upstream's exposure rule names it
  list           The tenant's keys: id, principal, roles, status, created, expires, last used
  revoke <id>    Refuse the key (its id, the 8 characters after cc_) from its next request on

${WHERE}
`;
