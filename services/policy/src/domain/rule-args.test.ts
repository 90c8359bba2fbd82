import { describe, expect, it } from "vitest";
import { argsSchemaOf, mergeArgsFields } from "./args-schema.js";
import { validatePolicyDocument } from "./policy-document.js";
import { ruleArgsProblems } from "./rule-args.js";

const WRITE = {
  type: "object",
  properties: { path: { type: "string" }, content: { type: "string" }, n: { type: "integer" }, edits: { type: "array", items: { type: "object" } } },
  required: ["path", "content"],
};
const LIST = { type: "object", properties: {} };
const tools = [
  { capability: "files.write_file", inputSchema: WRITE },
  { capability: "files.list_allowed_directories", inputSchema: LIST },
];
const problems = (rules: unknown[], pinned: ReadonlyArray<{ capability: string; inputSchema: unknown }> = tools) => ruleArgsProblems(validatePolicyDocument({ rules }, "policy.json"), pinned);

describe("rules checked against the pinned input schemas of the tools they name", () => {
  it("names a rule reading an argument no named tool declares, with the position and the tools", () => {
    expect(problems([{ capability: "files.write_file", effect: "deny", when: 'args.pth.startsWith("/etc")' }])).toEqual([
      {
        rule: 0,
        tools: ["files.write_file"],
        message: 'rules[0].when: unknown field "pth" at 1:6 in "args.pth.startsWith(\\"/etc\\")", against the pinned input schemas of files.write_file',
      },
    ]);
    expect(problems([{ capability: "files.*", effect: "deny", when: "args.recursive" }])[0]?.tools).toEqual(["files.list_allowed_directories", "files.write_file"]);
  });

  it("reads the union of the named tools' fields, so a pattern may read what one of them takes", () => {
    expect(problems([{ capability: "files.*", effect: "deny", when: 'has(args.path) && args.path.startsWith("/etc")' }])).toEqual([]);
    expect(problems([{ capability: "files.*", effect: "deny", when: "args.n == 3 && args.edits.size() > 0" }])).toEqual([]);
  });

  it("checks the types it knows, and leaves numbers dynamic as at run time", () => {
    expect(problems([{ capability: "files.write_file", effect: "deny", when: "args.path + 1 == 2" }])[0]?.message).toContain("no such overload: string + int");
    expect(problems([{ capability: "files.write_file", effect: "deny", when: "args.n == 3" }])).toEqual([]);
  });

  it("does not check a rule naming no pinned tool, a free-form schema, or one without args", () => {
    expect(problems([{ capability: "jira.*", effect: "deny", when: "args.anything == 1" }])).toEqual([]);
    expect(problems([{ capability: "free.x", effect: "deny", when: "args.anything == 1" }], [{ capability: "free.x", inputSchema: { type: "object" } }])).toEqual([]);
    expect(problems([{ capability: "files.*", effect: "deny", when: '"x" in principal.roles' }])).toEqual([]);
  });
});

describe("argsSchemaOf", () => {
  it("types strings, bools and lists of them, nests objects, and leaves numbers, unions and free-form maps dynamic", () => {
    expect(
      argsSchemaOf({
        type: "object",
        properties: {
          s: { type: "string" },
          b: { type: "boolean" },
          i: { type: "integer" },
          u: { type: ["string", "null"] },
          l: { type: "array", items: { type: "string" } },
          o: { type: "object", properties: { d: { type: "string" } } },
          m: { type: "object", additionalProperties: { type: "string" } },
        },
      }),
    ).toEqual({ s: "string", b: "bool", i: "dyn", u: "dyn", l: "list<string>", o: { d: "string" }, m: "map" });
    expect(argsSchemaOf(LIST)).toEqual({});
    expect(argsSchemaOf({ type: "object" })).toBeUndefined();
    expect(mergeArgsFields({ a: "string", o: { x: "string" } }, { a: "bool", o: { y: "bool" }, c: "map" })).toEqual({ a: "dyn", o: { x: "string", y: "bool" }, c: "map" });
  });
});
