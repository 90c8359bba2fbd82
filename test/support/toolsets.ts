import { expect } from "vitest";
import { runToExit } from "./processes.js";

/**
 * Has the operator register `tenant` with every toolset enabled, the opt-in finance-reference
 * included (`chaos-core tenants create <tenant> --toolsets all`), in the registry `env` finds:
 * the data directory's (through the server running there, or its embedded database), or
 * DATABASE_URL's. Tenant "default" is the local user of stdio and of a loopback `serve`.
 */
export async function enableEveryToolset(env: Record<string, string | undefined>, tenant = "default"): Promise<void> {
  const r = await runToExit(["tenants", "create", tenant, "--toolsets", "all"], env);
  expect(r.code, `chaos-core tenants create ${tenant} --toolsets all\n${r.stderr}`).toBe(0);
}
