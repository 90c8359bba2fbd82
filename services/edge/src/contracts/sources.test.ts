import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import { connectInMemory, uniqueTenant, withEveryToolset, type Connected } from "../test-support/in-memory.js";
import { publishedResultSchema } from "../definitions/published-schema.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import { edgeSurface } from "./sources.js";

let services: TestServices;
let c: Connected;

beforeAll(async () => {
  services = await startTestServices("contract_sources");
  // Every toolset: the lock pins every tool this build can serve, the opt-in finance-reference included.
  c = await connectInMemory(withEveryToolset(services.deps(createMemorySessionStore())), { tenant: uniqueTenant("contracts"), principal: "tester" });
});

afterAll(async () => {
  await c?.close();
  await services?.close();
});

describe("edgeSurface (what the contracts pin)", () => {
  it("is exactly what tools/list, prompts/list and the resource listings publish, and each result schema whole (tools/list shows its top level)", async () => {
    const surface = edgeSurface();
    const { tools } = await c.client.listTools();
    expect(surface.tools.map((t) => t.name)).toEqual(tools.map((t) => t.name));
    for (const listed of tools) {
      const mine = surface.tools.find((t) => t.name === listed.name)!;
      expect({ name: mine.name, input: mine.inputSchema, output: publishedResultSchema(mine.outputSchema), description: mine.description, title: mine.title }).toEqual({
        name: listed.name,
        input: listed.inputSchema,
        output: listed.outputSchema,
        description: listed.description,
        title: listed.title,
      });
      expect(listed.annotations).toMatchObject(mine.annotations);
    }
    const { prompts } = await c.client.listPrompts();
    expect(surface.prompts.map((p) => ({ name: p.name, arguments: p.arguments.map((a) => ({ name: a.name, required: a.required })) }))).toEqual(
      prompts.map((p) => ({ name: p.name, arguments: (p.arguments ?? []).map((a) => ({ name: a.name, required: a.required ?? false })) })),
    );
    const { resources } = await c.client.listResources();
    const { resourceTemplates } = await c.client.listResourceTemplates();
    for (const r of surface.resources.filter((x) => x.uri)) expect(resources.map((x) => x.uri)).toContain(r.uri);
    expect(surface.resources.filter((x) => x.uriTemplate).map((x) => x.uriTemplate)).toEqual(resourceTemplates.map((t) => t.uriTemplate));
  });
});
