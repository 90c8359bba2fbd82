import { describe, expect, it } from "vitest";
import { inputFromObjective } from "./objective-input.js";

const schema = (properties: Record<string, { type: string }>, required: string[]) => ({ type: "object", properties, required });

describe("an upstream tool's input read from an objective", () => {
  it("fills what the objective says plainly", () => {
    expect(inputFromObjective(schema({ limit: { type: "number" } }, []), "list the channels")).toEqual({});
    expect(inputFromObjective(schema({ path: { type: "string" } }, ["path"]), "read /srv/a.txt please")).toEqual({ path: "/srv/a.txt" });
    expect(inputFromObjective(schema({ path: { type: "string" } }, ["path"]), "open notes.md")).toEqual({ path: "notes.md" });
    expect(inputFromObjective(schema({ url: { type: "string" } }, ["url"]), "open https://example.com/a?b=1 in the browser")).toEqual({ url: "https://example.com/a?b=1" });
    expect(inputFromObjective(schema({ message: { type: "string" } }, ["message"]), 'echo "hello world"')).toEqual({ message: "hello world" });
    expect(inputFromObjective(schema({ a: { type: "number" }, b: { type: "integer" } }, ["a", "b"]), "add 17 and 25")).toEqual({ a: 17, b: 25 });
  });

  it("guesses nothing: two candidates, none, or a required field of another kind leave it undefined", () => {
    expect(inputFromObjective(schema({ path: { type: "string" } }, ["path"]), "copy /a.txt to /b.txt")).toBeUndefined();
    expect(inputFromObjective(schema({ path: { type: "string" } }, ["path"]), "read the report")).toBeUndefined();
    expect(inputFromObjective(schema({ a: { type: "number" }, b: { type: "number" } }, ["a", "b"]), "add 17 and 25 and 3")).toBeUndefined();
    expect(inputFromObjective(schema({ owner: { type: "string" }, repo: { type: "string" } }, ["owner", "repo"]), 'fork "acme/api"')).toBeUndefined();
    expect(inputFromObjective(schema({ tags: { type: "array" } }, ["tags"]), "tag it")).toBeUndefined();
    // A URL is never taken for a path.
    expect(inputFromObjective(schema({ path: { type: "string" } }, ["path"]), "save https://example.com/x.html")).toBeUndefined();
  });
});
