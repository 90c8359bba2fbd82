import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seedDataDir } from "../support/data-dir-template.js";
import { httpClient, removeDir, runToExit, startServe, tempDir, type ServeProcess } from "../support/processes.js";

// Issue 13, "Tenants administered": a tenant's spend and tool-approval policies live in the tenant
// registry (chaos-core tenants settings --ledger-policy) with the rest of its administration, win
// over the ledger policy file for that tenant from its next call, and touch no other tenant.

const tag = randomBytes(3).toString("hex");

async function cli(args: string[], env: Record<string, string>): Promise<string> {
  const r = await runToExit(args, env);
  expect(r.code, `chaos-core ${args.join(" ")}\n${r.stderr}`).toBe(0);
  return r.stdout;
}

describe("a tenant's ledger policy in the registry", () => {
  const acme = `acme-${tag}`;
  const bravo = `bravo-${tag}`;
  let dir: string;
  let serve: ServeProcess;
  let env: Record<string, string>;
  const clients: Client[] = [];
  let ann: Client;
  let bob: Client;

  /** The gate's state for a BUY of `notional` under policy equity. */
  async function gate(c: Client, notional: number): Promise<{ state: string; policyVersion: unknown }> {
    const r = await c.callTool({ name: "evaluate_spend_gate", arguments: { policy: "equity", action: { action: "BUY", asset: "AAPL", notional, confidence: 0.9 } } });
    expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
    const s = r.structuredContent as { state: string; result: { policy?: { version?: unknown } } };
    return { state: s.state, policyVersion: s.result.policy?.version };
  }

  beforeAll(async () => {
    dir = tempDir("chaos-core-ledger-policy-");
    await seedDataDir(dir);
    env = { CHAOS_CORE_DATA_DIR: dir };
    serve = await startServe(env);
    await cli(["tenants", "create", acme], env);
    await cli(["tenants", "create", bravo], env);
    const key = async (tenant: string, principal: string) => (await cli(["keys", "create", "--tenant", tenant, "--principal", principal], env)).trim();
    for (const [tenant, principal] of [
      [acme, "ann"],
      [bravo, "bob"],
    ] as const) {
      const c = await httpClient(serve.url, { Authorization: `Bearer ${await key(tenant, principal)}` });
      clients.push(c);
      if (tenant === acme) ann = c;
      else bob = c;
    }
  }, 120_000);

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await serve?.stop();
    if (dir) removeDir(dir);
  });

  it("applies from the tenant's next call, to that tenant only, and is cleared with none", async () => {
    // The reference equity policy locks a BUY of 100 for both tenants.
    expect((await gate(ann, 100)).state).toBe("LOCKED");
    expect((await gate(bob, 100)).state).toBe("LOCKED");

    const file = join(dir, "acme-ledger-policy.json");
    const equity = { version: "equity-acme-1", max_notional: 50, daily_cap: 200, hitl_threshold: 25, min_confidence: 0.5, allowed_actions: ["BUY"], per_asset_limits: {} };
    writeFileSync(file, JSON.stringify({ spend_policies: { equity } }));
    const shown = JSON.parse(await cli(["tenants", "settings", acme, "--ledger-policy", file, "--json"], env)) as { tenant: { settings: { ledger_policy: unknown } } };
    expect(shown.tenant.settings.ledger_policy).toEqual({ spend_policies: { equity } });

    const tightened = await gate(ann, 100);
    expect(tightened.state).toBe("BLOCKED");
    expect(JSON.stringify(tightened)).toContain("equity-acme-1");
    // Bravo is held to the file's (here the reference) policy still.
    expect((await gate(bob, 100)).state).toBe("LOCKED");
    // What an agent can read of its policies says the same.
    const info = await ann.callTool({ name: "chp_version", arguments: {} });
    expect(JSON.stringify(info)).toContain("equity-acme-1");

    await cli(["tenants", "settings", acme, "--ledger-policy", "none"], env);
    expect((await gate(ann, 100)).state).toBe("LOCKED");
  });

  it("refuses a malformed ledger policy naming the field, and keeps the one in force", async () => {
    const file = join(dir, "bad-ledger-policy.json");
    writeFileSync(file, JSON.stringify({ spend_policies: { equity: { version: "x", max_notional: -5 } } }));
    const r = await runToExit(["tenants", "settings", acme, "--ledger-policy", file], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/ledgerPolicy\.spend_policies\.equity\.max_notional/);
    expect((await gate(ann, 100)).state).toBe("LOCKED");
  });
});
