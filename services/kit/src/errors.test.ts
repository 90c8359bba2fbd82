import { status } from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { ChaosError, toGrpcError, toMcpErrorResult } from "./errors.js";

describe("error mapping", () => {
  it("maps a domain error to a gRPC status carrying the stable code", () => {
    const g = toGrpcError(new ChaosError("policy_denied", "no"));
    expect(g.code).toBe(status.PERMISSION_DENIED);
    expect(g.metadata?.get("chaoscore-error-code")).toEqual(["policy_denied"]);
  });

  it("maps a domain error to an MCP isError result with the code", () => {
    const r = toMcpErrorResult(new ChaosError("not_found", "no such plan"));
    expect(r.isError).toBe(true);
    expect(r.structuredContent.error).toEqual({ code: "not_found", message: "no such plan" });
    expect(r.content[0]?.text).toBe("not_found: no such plan");
  });

  it("hides the message of an unexpected error", () => {
    const r = toMcpErrorResult(new Error("password=hunter2"));
    expect(r.structuredContent.error.code).toBe("internal");
    expect(JSON.stringify(r)).not.toContain("hunter2");
  });
});
