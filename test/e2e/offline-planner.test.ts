import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seedDataDir } from "../support/data-dir-template.js";
import { removeDir, runToExit, stdioClient, tempDir } from "../support/processes.js";

type Structured = Record<string, unknown>;

function structured(res: Awaited<ReturnType<Client["callTool"]>>): Structured {
  expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
  return res.structuredContent as Structured;
}

/**
 * The offline planner as a new user meets it: `chaos-core stdio` on the embedded default, no
 * model configured, driven by the MCP SDK's real client. The operator requires approval for
 * memory.forget (the default policy would run it and record it).
 */
describe("everyday objectives, offline, through a real MCP client", () => {
  const dir = tempDir("chaos-core-offline-");
  const env = { CHAOS_CORE_DATA_DIR: dir };
  let client: Client;
  const achieve = async (objective: string) => structured(await client.callTool({ name: "chaoscore_achieve", arguments: { objective } }));
  const plan = async (objective: string) => structured(await client.callTool({ name: "chaoscore_plan", arguments: { objective } }));

  beforeAll(async () => {
    await seedDataDir(dir);
    writeFileSync(join(dir, "policy.json"), JSON.stringify({ requireConfirmationFor: ["memory.forget"] }));
    ({ client } = await stdioClient(env));
  });

  afterAll(async () => {
    await client?.close();
    removeDir(dir);
  });

  it("remember → ask → search by tag → forget (approved by the operator) → ask again: nothing stored", async () => {
    const stored = await achieve("Remember that the deploy window is friday, tagged ops");
    expect(stored).toMatchObject({ status: "succeeded", summary: "Remembered deploy-window: friday." });
    expect((stored.plans as Structured[])[0]).toMatchObject({ source: "heuristic", model: "none" });
    expect(structured(await client.callTool({ name: "chaoscore_recall", arguments: { key: "deploy-window" } }))).toMatchObject({
      items: [{ key: "deploy-window", value: "friday", tags: ["note", "ops"] }],
    });

    expect(await achieve("what is the deploy window?")).toMatchObject({ status: "succeeded", summary: "deploy-window: friday." });
    expect(((await achieve("recall everything tagged ops")).summary as string)).toBe('1 item for tagged ops: deploy-window: friday.');
    expect(((await achieve("list what you remember")).summary as string)).toContain("deploy-window: friday");

    const forget = await achieve("forget the deploy window");
    expect(forget.status).toBe("pending_approval");
    const step = (forget.results as Structured[])[0]!;
    expect(step).toMatchObject({ capability: "memory.forget", status: "pending_approval" });
    const id = (step.approval as { approval_id: string }).approval_id;
    const listed = await runToExit(["approvals", "list"], env, 30_000);
    // The person approving sees the exact key that will be deleted.
    expect(listed.stdout).toContain(id);
    expect(listed.stdout).toContain('"deploy-window"');
    const approved = await runToExit(["approvals", "approve", id], env, 30_000);
    expect(approved.code, approved.stderr).toBe(0);
    const ran = structured(await client.callTool({ name: "chaoscore_execute", arguments: { approval_id: id } }));
    expect((ran.results as Structured[])[0]).toMatchObject({ status: "executed", output: { key: "deploy-window", deleted: true } });

    const again = await achieve("what is the deploy window?");
    // Memory was asked and holds nothing: offline, that leaves the question unanswered, and the answer says what would answer it.
    expect(again).toMatchObject({
      status: "succeeded",
      summary:
        'Memory holds nothing about "deploy-window". A question beyond what memory holds needs a language model; none is configured ' +
        "(set CHAOS_CORE_PROVIDER=openai (with OPENAI_API_KEY and OPENAI_MODEL) or CHAOS_CORE_PROVIDER=openai-compatible " +
        "(with OPENAI_BASE_URL and OPENAI_MODEL); see docs/cognition.md).",
    });
  }, 240_000);

  it("plans a recurring objective from its remembered procedure (source: procedure)", async () => {
    // "what is the deploy window?" succeeded above: chaoscore_plan now starts from that procedure.
    const planned = await plan("What is the deploy window?");
    expect(planned.source).toBe("procedure");
    expect((planned.steps as Structured[]).map((s) => s.capability)).toEqual(["memory.recall"]);
  });

  it("says plainly what needs a language model", async () => {
    const planned = await plan("write a haiku about gRPC");
    expect(planned.steps).toEqual([]);
    expect((planned.notes as string[]).join(" ")).toContain("needs a language model; none is configured");
    const run = await achieve("write a haiku about gRPC");
    expect(run.status).toBe("failed");
    expect((run.notes as string[]).join(" ")).toContain("needs a language model; none is configured");
  });

  it("fetches through policy: a URL whose host the policy does not allow is denied, and the plan held one http.request", async () => {
    const run = await achieve("check https://status.example.com and remember the result");
    const steps = ((run.plans as Structured[])[0]!.steps as Structured[]).map((s) => [s.capability, s.input]);
    expect(steps).toEqual([
      ["http.request", { url: "https://status.example.com" }],
      ["memory.remember", { key: "status.example.com", value: { $step: "p1-s1", path: "/status" }, tags: ["note"] }],
    ]);
    expect(run.status).toBe("denied");
  });
});
