import { expect } from "vitest";
import { runToExit } from "./processes.js";

/**
 * Has the operator register `tenant` with every toolset enabled, the opt-in finance-reference
 * included (`chaos-core tenants create <tenant> --toolsets all`, or `tenants settings` when it is
 * registered already), in the registry `env` finds:
 * the data directory's (through the server running there, or its embedded database), or
 * DATABASE_URL's. Tenant "default" is the local user of stdio and of a loopback `serve`.
 */
export async function enableEveryToolset(env: Record<string, string | undefined>, tenant = "default"): Promise<void> {
  const created = await runToExit(["tenants", "create", tenant, "--toolsets", "all"], env);
  if (created.code === 0) return;
  // Registered already (a server registers "default" when it starts): its settings change instead.
  expect(created.stderr, `chaos-core tenants create ${tenant} --toolsets all\n${created.stderr}`).toContain("already exists");
  const set = await runToExit(["tenants", "settings", tenant, "--toolsets", "all"], env);
  expect(set.code, `chaos-core tenants settings ${tenant} --toolsets all\n${set.stderr}`).toBe(0);
}
