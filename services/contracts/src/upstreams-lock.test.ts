import { describe, expect, it } from "vitest";
import { diffContracts } from "./diff.js";
import { parseUpstreamsLock, serializeUpstreamsLock, upstreamContracts, type UpstreamToolDefinition } from "./upstreams-lock.js";

const echo: UpstreamToolDefinition = {
  name: "echo",
  description: "Echoes back the input string",
  inputSchema: { type: "object", properties: { message: { type: "string" } }, required: ["message"], $schema: "http://json-schema.org/draft-07/schema#" },
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
};
const bare: UpstreamToolDefinition = { name: "get-env", inputSchema: { type: "object" } };

describe("an upstreams lock", () => {
  it("round-trips the same bytes, and reads a hint an upstream left out as the spec's default", () => {
    const text = serializeUpstreamsLock(new Map([["everything", upstreamContracts("everything", [echo, bare])]]));
    expect(serializeUpstreamsLock(parseUpstreamsLock(text))).toBe(text);
    const pinned = parseUpstreamsLock(text).get("everything")!.tools["get-env"]!;
    // No annotations: not read-only, destructive, open world — never recorded as safer than it said.
    expect(pinned.behavior).toMatchObject({ readOnly: false, destructive: true, idempotent: false, openWorld: true });
  });

  it("gives a description change a cosmetic verdict and a new required field a breaking one", () => {
    const pinned = upstreamContracts("everything", [echo]);
    const reworded = upstreamContracts("everything", [{ ...echo, description: "Echoes its input back" }]);
    expect(diffContracts(pinned, reworded).verdict).toBe("COSMETIC");
    const stricter = upstreamContracts("everything", [
      { ...echo, inputSchema: { ...echo.inputSchema, properties: { message: { type: "string" }, to: { type: "string" } }, required: ["message", "to"] } },
    ]);
    expect(diffContracts(pinned, stricter).verdict).toBe("BREAKING");
    const writes = upstreamContracts("everything", [{ ...echo, annotations: { ...echo.annotations, readOnlyHint: false, destructiveHint: true } }]);
    expect(diffContracts(pinned, writes).verdict).not.toBe("COSMETIC");
  });

  it("refuses an edited pin, naming the upstream and the field", () => {
    const text = serializeUpstreamsLock(new Map([["everything", upstreamContracts("everything", [echo])]]));
    const edited = text.replace("Echoes back the input string", "Echoes back anything");
    expect(() => parseUpstreamsLock(edited)).toThrow("upstreams.lock: upstreams.everything: its digests do not match its contracts");
    const broken = JSON.parse(text) as { upstreams: { everything: { tools: { echo: Record<string, unknown> } } } };
    delete broken.upstreams.everything.tools.echo.behavior;
    expect(() => parseUpstreamsLock(JSON.stringify(broken))).toThrow("upstreams.lock: upstreams.everything: tools.echo.behavior: must be an object");
  });
});
