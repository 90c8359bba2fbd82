import { referenceTool, REFERENCE_TOOL_NAMES as LEDGER_NAMES } from "@chaos-core/ledger";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { REFERENCE_TOOL_NAMES, REFERENCE_TOOL_SPECS } from "./arguments.js";

/** The JSON Schema of a zod object without descriptions (the edge adds them for the model). */
function shapeOf(schema: z.ZodType): unknown {
  return JSON.parse(JSON.stringify(z.toJSONSchema(schema), (k: string, v: unknown) => (k === "description" ? undefined : v)));
}

describe("the finance tools' arguments at the edge", () => {
  it("mirror the ledger's definitions exactly: names, scopes, policies and argument schemas", () => {
    expect([...REFERENCE_TOOL_NAMES]).toEqual([...LEDGER_NAMES]);
    for (const name of REFERENCE_TOOL_NAMES) {
      const ledger = referenceTool(name)!;
      const edge = REFERENCE_TOOL_SPECS[name];
      expect({ scope: edge.scope, policy: edge.spendPolicy }).toEqual({ scope: ledger.scope, policy: ledger.spendPolicy });
      expect(shapeOf(z.strictObject(edge.shape))).toEqual(shapeOf(ledger.args));
    }
  });
});
