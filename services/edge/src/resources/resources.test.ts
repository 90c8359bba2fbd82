import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { McpError, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import { connectInMemory, uniqueTenant, type Connected } from "../test-support/in-memory.js";
import { startTestLedger, type TestLedger } from "../test-support/ledger.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import type { EdgeDeps } from "../deps/edge-deps.js";

// Every resource, template and completion through a real SDK client (v1's, as the tests keep),
// over the real policy, cognition, council and ledger services.

let services: TestServices;
let ledger: TestLedger;
let deps: EdgeDeps;
const open: Connected[] = [];

async function connect(tenant = uniqueTenant("res"), over: EdgeDeps = deps): Promise<Connected> {
  const c = await connectInMemory(over, { tenant, principal: "agent" });
  open.push(c);
  return c;
}

function structured(res: CallToolResult): Record<string, unknown> {
  expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
  return res.structuredContent as Record<string, unknown>;
}

/** The one JSON document a resource read returns. */
async function readJson(c: Connected, uri: string): Promise<Record<string, unknown>> {
  const res = await c.client.readResource({ uri });
  expect(res.contents).toHaveLength(1);
  const [content] = res.contents as Array<{ uri: string; mimeType?: string; text?: string }>;
  expect(content).toMatchObject({ uri, mimeType: "application/json" });
  return JSON.parse(content!.text!) as Record<string, unknown>;
}

/** The JSON-RPC error a read fails with. */
async function readError(c: Connected, uri: string): Promise<McpError> {
  const err = await c.client.readResource({ uri }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, `reading ${uri} should fail`).toBeInstanceOf(McpError);
  return err as McpError;
}

async function expectNotFound(c: Connected, uri: string): Promise<McpError> {
  const err = await readError(c, uri);
  expect(err.code).toBe(-32602);
  expect(err.data).toEqual({ uri });
  return err;
}

async function newSession(c: Connected, task: string, title?: string): Promise<string> {
  const res = structured(await c.call("council_init", { task, ...(title ? { title } : {}) }));
  return res.sessionId as string;
}

beforeAll(async () => {
  services = await startTestServices("resources");
  ledger = await startTestLedger("resources", undefined, services.policy);
  deps = { ...services.deps(createMemorySessionStore()), ledger: ledger.client };
});

afterAll(async () => {
  for (const c of open) await c.close();
  await ledger?.close();
  await services?.close();
});

describe("resources", () => {
  it("are advertised with lenient subscriptions, no list-changed promise yet, and completions", async () => {
    const c = await connect();
    expect(c.client.getServerCapabilities()).toMatchObject({ resources: { subscribe: true, listChanged: false }, completions: {} });
  });

  it("lists the four static resources, then the tenant's council sessions newest first, and the two templates", async () => {
    const c = await connect();
    const empty = await c.client.listResources();
    expect(empty.resources.map((r) => r.uri)).toEqual(["chaoscore://policy", "chaoscore://capabilities", "chaoscore://ledger/checkpoint", "chaoscore://contracts/attestation"]);
    for (const r of empty.resources) expect(r).toMatchObject({ mimeType: "application/json", title: expect.any(String), description: expect.any(String) });

    const first = await newSession(c, "Plan the move of the billing database to a managed service", "Billing move");
    const second = await newSession(c, "Pick a queue for the audit events");
    // Another tenant's session is never listed.
    await newSession(await connect(), "Someone else's task, with its own words");
    const listed = await c.client.listResources();
    const sessions = listed.resources.slice(4);
    expect(sessions.map((r) => r.uri).sort()).toEqual([`council://sessions/${first}`, `council://sessions/${second}`].sort());
    expect(sessions.find((r) => r.uri.endsWith(first))).toMatchObject({
      name: first,
      title: "Billing move",
      mimeType: "application/json",
      description: expect.stringMatching(/^Active phase decompile; updated \d{4}-/),
    });

    const { resourceTemplates } = await c.client.listResourceTemplates();
    expect(resourceTemplates.map((t) => [t.name, t.uriTemplate])).toEqual([
      ["council-session", "council://sessions/{id}"],
      ["council-session-brief", "council://sessions/{id}/brief"],
    ]);
    for (const t of resourceTemplates) expect(t).toMatchObject({ mimeType: "application/json", title: expect.any(String) });
  });

  it("reads the policy and the capability registry as chaoscore_inspect shows them", async () => {
    const c = await connect();
    const policy = await readJson(c, "chaoscore://policy");
    const inspected = structured(await c.call("chaoscore_inspect", { what: "policy" }));
    expect(policy).toEqual(inspected.policy);
    expect(policy).toMatchObject({ version: expect.any(Number), source: expect.any(String), document: expect.any(Object) });

    const capabilities = await readJson(c, "chaoscore://capabilities");
    expect(capabilities).toEqual({ capabilities: structured(await c.call("chaoscore_inspect", { what: "capabilities" })).capabilities });
    expect((capabilities.capabilities as unknown[]).length).toBeGreaterThan(0);
  });

  it("reads the tenant's latest signed checkpoint and its verifier key, not found while the log is empty", async () => {
    const tenant = uniqueTenant("res-ledger");
    const c = await connect(tenant);
    await expectNotFound(c, "chaoscore://ledger/checkpoint");
    // No start-time contract check ran for these deps: nothing to show, so not found.
    await expectNotFound(c, "chaoscore://contracts/attestation");
    const o = { ctx: { tenant, principal: "agent" } };
    await ledger.client.append({ event: { type: "test.resource" } }, o);
    await ledger.client.append({ event: { type: "test.resource" } }, o);
    const { checkpoint } = await ledger.client.getCheckpoint({}, o);
    expect(checkpoint).toBeDefined();
    const read = await readJson(c, "chaoscore://ledger/checkpoint");
    expect(read).toEqual({ size: Number(checkpoint!.size), root_hash: checkpoint!.rootHash, note: checkpoint!.note, verifier_key: checkpoint!.verifierKey });
    expect(read.size).toBe(2);
    // Another tenant's log is its own: still empty there.
    await expectNotFound(await connect(), "chaoscore://ledger/checkpoint");
  });

  it("fails closed without a ledger: an internal error naming it, no invented checkpoint", async () => {
    const c = await connect(uniqueTenant("res-noledger"), services.deps(createMemorySessionStore()));
    const err = await readError(c, "chaoscore://ledger/checkpoint");
    expect(err.code).toBe(-32603);
    expect(err.message).toMatch(/unavailable: no ledger is configured/);
  });

  it("reads a council session as council_recall gives it, and its active brief as council_phase_brief renders it", async () => {
    const c = await connect();
    const id = await newSession(c, "Plan the move of the billing database to a managed service", "Billing move");
    const session = await readJson(c, `council://sessions/${id}`);
    expect(session).toEqual(structured(await c.call("council_recall", { sessionId: id, format: "full" })));
    expect(session).toMatchObject({ sessionId: id, status: "active", activePhase: "decompile" });

    const brief = await readJson(c, `council://sessions/${id}/brief`);
    const prompt = await c.client.getPrompt({ name: "council_phase_brief", arguments: { sessionId: id } });
    expect(brief).toMatchObject({ sessionId: id, sessionComplete: false, phase: "decompile", persona: "Systems Analyst" });
    expect(brief.text).toBe((prompt.messages[0]!.content as { text: string }).text);
    expect((brief.authority as string[]).length).toBeGreaterThan(0);
  });

  it("answers another tenant's council session exactly like an unknown one: -32602 with data.uri", async () => {
    const owner = await connect();
    const other = await connect();
    const id = await newSession(owner, "A task only its tenant may read, in words");
    const unknown = "00000000-0000-4000-8000-0000000000ff";
    for (const suffix of ["", "/brief"]) {
      const theirs = await expectNotFound(other, `council://sessions/${id}${suffix}`);
      const missing = await expectNotFound(other, `council://sessions/${unknown}${suffix}`);
      expect(theirs.message).toBe(missing.message.replace(unknown, id));
    }
    // Not a session id at all, and URIs nothing serves.
    for (const uri of ["council://sessions/nope", "council://sessions/nope/brief", "chaoscore://nothing", "test://nonexistent-resource"]) {
      await expectNotFound(other, uri);
    }
    // The owner still reads it.
    expect(await readJson(owner, `council://sessions/${id}`)).toMatchObject({ sessionId: id });
  });

  it("completes session ids by prefix, for the prompt and both templates, over the caller's tenant only", async () => {
    const c = await connect();
    const other = await connect();
    const ids = [await newSession(c, "First task of the completion test"), await newSession(c, "Second task of the completion test")];
    const theirs = await newSession(other, "Their task of the completion test");
    const refs = [
      { ref: { type: "ref/prompt" as const, name: "council_phase_brief" }, argument: "sessionId" },
      { ref: { type: "ref/resource" as const, uri: "council://sessions/{id}" }, argument: "id" },
      { ref: { type: "ref/resource" as const, uri: "council://sessions/{id}/brief" }, argument: "id" },
    ];
    for (const { ref, argument } of refs) {
      const complete = async (value: string) => (await c.client.complete({ ref, argument: { name: argument, value } })).completion;
      const all = await complete("");
      expect([...all.values].sort(), JSON.stringify(ref)).toEqual([...ids].sort());
      expect(all.hasMore).toBe(false);
      // Random UUIDs: 13 characters tell the two apart.
      expect((await complete(ids[1]!.slice(0, 13))).values).toEqual([ids[1]]);
      expect((await complete(ids[0]!)).values).toEqual([ids[0]]);
      // Another tenant's id is not offered, even typed out; a value no id starts with completes to nothing.
      expect((await complete(theirs)).values).toEqual([]);
      expect((await complete("XYZ")).values).toEqual([]);
      expect((await complete("%")).values).toEqual([]);
    }
    expect((await other.client.complete({ ref: refs[0]!.ref, argument: { name: "sessionId", value: "" } })).completion.values).toEqual([theirs]);
  });

  it("caps a completion at 100 values", async () => {
    const c = await connect();
    await Promise.all(Array.from({ length: 101 }, (_, i) => newSession(c, `Task number ${i} of the completion cap test`)));
    const { completion } = await c.client.complete({ ref: { type: "ref/resource", uri: "council://sessions/{id}" }, argument: { name: "id", value: "" } });
    expect(completion.values).toHaveLength(100);
    // resources/list offers the newest 50 of them.
    expect((await c.client.listResources()).resources.filter((r) => r.uri.startsWith("council://"))).toHaveLength(50);
  });

  it("accepts a legacy subscription to any URI, and its cancellation", async () => {
    const c = await connect();
    for (const uri of ["chaoscore://policy", "test://watched-resource", `council://sessions/00000000-0000-4000-8000-0000000000ff`]) {
      expect(await c.client.subscribeResource({ uri })).toEqual({});
      expect(await c.client.unsubscribeResource({ uri })).toEqual({});
    }
  });
});
