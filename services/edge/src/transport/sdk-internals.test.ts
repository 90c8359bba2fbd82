import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/server";
import { CapabilitySchema } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { authInfoOf } from "../auth/identity.js";
import type { UpstreamCatalog } from "../clients/upstream-catalog.js";
import { createChaosCoreServer } from "../server/create-server.js";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import type { SessionRecord } from "../sessions/session-store.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import { replayInitialize } from "./sdk-internals.js";

// This file guards what session rehydration relies on: that replaying a stored initialize through
// the transport's public handleRequest restores the session. If it fails after an SDK upgrade,
// sessions can no longer move between edge replicas: fix sdk-internals.ts first.

let services: TestServices;

beforeAll(async () => {
  services = await startTestServices("sdk_internals");
});

afterAll(async () => {
  await services?.close();
});

function storedRecord(id: string): SessionRecord {
  return {
    id,
    tenant: "default",
    principal: "local",
    transport: "http",
    protocolVersion: "2025-06-18",
    clientInfo: { name: "original-client", version: "9.9.9" },
    clientCapabilities: { elicitation: { form: {} }, roots: { listChanged: true } },
    createdAt: new Date().toISOString(),
    lastSeenAt: new Date().toISOString(),
  };
}

/** A tools/list (or another request) sent to the transport the way the HTTP layer would pass it on, with the request's credential. */
async function listToolsThrough(
  transport: WebStandardStreamableHTTPServerTransport,
  sessionId: string,
  authInfo?: ReturnType<typeof authInfoOf>,
  body: Record<string, unknown> = { jsonrpc: "2.0", id: 1, method: "tools/list" },
): Promise<Response> {
  return transport.handleRequest(
    new Request("http://127.0.0.1/mcp", {
      method: "POST",
      headers: {
        accept: "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-session-id": sessionId,
        "mcp-protocol-version": "2025-06-18",
      },
      body: JSON.stringify(body),
    }),
    authInfo ? { authInfo } : undefined,
  );
}

function fresh(record: SessionRecord) {
  const deps = services.deps(createMemorySessionStore());
  const server = createChaosCoreServer(deps, { id: record.id, tenant: record.tenant, principal: record.principal });
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: () => record.id });
  return { server, transport };
}

describe("rehydrating a session from its stored record", () => {
  it("is needed: a fresh transport refuses a session it did not initialize", async () => {
    const record = storedRecord(randomUUID());
    const { server, transport } = fresh(record);
    await server.connect(transport);
    const res = await listToolsThrough(transport, record.id);
    expect(res.status).toBe(400);
    expect(await res.text()).toMatch(/not initialized/);
    await server.close();
  });

  it("restores the session id, the initialized state and what the client declared", async () => {
    const record = storedRecord(randomUUID());
    const { server, transport } = fresh(record);
    await server.connect(transport);
    await replayInitialize(server, transport, record);

    expect(transport.sessionId).toBe(record.id);
    expect(server.server.getClientVersion()).toEqual(record.clientInfo);
    expect(server.server.getClientCapabilities()).toEqual(record.clientCapabilities);

    const res = await listToolsThrough(transport, record.id);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain("chaoscore_remember");
    // Another id is still refused, as for any session.
    expect((await listToolsThrough(transport, randomUUID())).status).toBe(404);
    await server.close();
  });

  it("fails loudly instead of serving a half-restored session", async () => {
    const record = storedRecord(randomUUID());
    const { server } = fresh(record);
    // A transport whose generator does not produce the stored id cannot serve this session.
    const wrong = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: () => "another-id" });
    await server.connect(wrong);
    await expect(replayInitialize(server, wrong, record)).rejects.toThrow(/sdk-internals\.ts/);
    await server.close();
  });
});

describe("holding a session's tools/list and calls to each request's roles", () => {
  // What cognition answers for an upstream tool granted to the role "support" of tenant default.
  const helpdesk = create(CapabilitySchema, {
    name: "helpdesk.echo",
    description: "Echoes",
    risk: "low",
    upstream: { upstream: "helpdesk", tool: "echo", mcpName: "helpdesk__echo", grants: [{ tenants: ["default"], roles: ["support"], as: "tools" }] },
  });
  const catalog: UpstreamCatalog = { capabilities: () => [helpdesk], refresh: async () => {}, onChange: () => () => {} };

  it("lists and refuses by name what the roles of the request's own credential are not offered, in one session", async () => {
    const record = storedRecord(randomUUID());
    const deps = { ...services.deps(createMemorySessionStore()), upstreams: catalog };
    const server = createChaosCoreServer(deps, { id: record.id, tenant: record.tenant, principal: record.principal });
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: () => record.id });
    await server.connect(transport);
    await replayInitialize(server, transport, record);
    const support = authInfoOf({ tenant: "default", principal: "local", roles: ["support"] });
    const plain = authInfoOf({ tenant: "default", principal: "local", roles: ["approver"] });

    expect(await (await listToolsThrough(transport, record.id, support)).text()).toContain('"helpdesk__echo"');
    const unlisted = await (await listToolsThrough(transport, record.id, plain)).text();
    expect(unlisted).toContain('"chaoscore_remember"');
    expect(unlisted).not.toContain("helpdesk__echo");
    expect(await (await listToolsThrough(transport, record.id)).text()).not.toContain("helpdesk__echo");
    // Roles of a credential of another principal count for nothing here.
    expect(await (await listToolsThrough(transport, record.id, authInfoOf({ tenant: "default", principal: "sam", roles: ["support"] }))).text()).not.toContain("helpdesk__echo");

    const call = { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "helpdesk__echo", arguments: {} } };
    const refused = await (await listToolsThrough(transport, record.id, plain, call)).text();
    expect(refused).toContain("Unknown tool: helpdesk__echo");
    await server.close();
  });
});
