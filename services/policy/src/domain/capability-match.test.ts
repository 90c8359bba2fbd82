import { describe, expect, it } from "vitest";
import { entryMatches, isCapabilityPattern, mostSpecificMatch } from "./capability-match.js";

describe("a policy's capability names and patterns", () => {
  it("takes only a prefix followed by .* as a pattern", () => {
    expect(isCapabilityPattern("files.*")).toBe(true);
    expect(isCapabilityPattern("github.issues.*")).toBe(true);
    for (const entry of ["*", "files*", "files.*.read", "*.write_file", "files.**", "Files.*", "files.write_file"]) expect(isCapabilityPattern(entry), entry).toBe(false);
  });

  it("matches a whole segment, never a longer name that starts the same", () => {
    expect(entryMatches("files.*", "files.write_file")).toBe(true);
    expect(entryMatches("files.*", "files_backup.write_file")).toBe(false);
    expect(entryMatches("files.*", "files")).toBe(false);
    expect(entryMatches("files.write_file", "files.write_file")).toBe(true);
  });

  it("picks the exact name over a pattern, and the longer prefix among patterns", () => {
    expect(mostSpecificMatch(["github.*", "github.issues.create", "github.issues.*"], "github.issues.create")).toEqual({ entry: "github.issues.create", exact: true });
    expect(mostSpecificMatch(["github.*", "github.issues.*"], "github.issues.close")).toEqual({ entry: "github.issues.*", exact: false });
    expect(mostSpecificMatch(["github.*"], "files.read")).toBeUndefined();
  });
});
