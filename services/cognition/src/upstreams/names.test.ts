import { describe, expect, it } from "vitest";
import { CAPABILITY_NAME_RE } from "@chaos-core/kit";
import { toolSegment, upstreamToolNames } from "./names.js";

describe("an upstream tool's names", () => {
  it("map the names real servers use into the capability-name rule and the hosts' tool-name rule", () => {
    expect(toolSegment("get-env")).toBe("get_env");
    expect(toolSegment("createIssue")).toBe("create_issue");
    expect(toolSegment("read_text_file")).toBe("read_text_file");
    expect(toolSegment("getHTTPResponse")).toBe("get_http_response");
    expect(toolSegment("2fa.verify")).toBe("t_2fa_verify");
    expect(toolSegment("--")).toBeUndefined();
    const names = upstreamToolNames("everything", ["echo", "get-env", "getTinyImage"]);
    expect(names).toEqual([
      { tool: "echo", capability: "everything.echo", mcpName: "everything__echo" },
      { tool: "get-env", capability: "everything.get_env", mcpName: "everything__get_env" },
      { tool: "getTinyImage", capability: "everything.get_tiny_image", mcpName: "everything__get_tiny_image" },
    ]);
    for (const n of names) {
      expect(n.capability).toMatch(CAPABILITY_NAME_RE);
      expect(n.mcpName).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    }
  });

  it("refuses two tools that map to one name, naming both, rather than dropping or renaming one", () => {
    expect(() => upstreamToolNames("gh", ["create-issue", "createIssue", "ok"])).toThrow('upstream "gh": tools "create-issue" and "createIssue" both map to gh.create_issue');
    expect(() => upstreamToolNames("gh", ["x".repeat(70)])).toThrow(/longer than 64 characters/);
  });
});
