import { z } from "zod";
import { canonicalJson, ChaosError, contentHash, parseChpJson, scanJsonText } from "@chaos-core/kit";
import { MAX_JSON_DEPTH } from "../../config.js";
import { defineTool } from "../../definitions/tool.js";

/** Largest input hashed, as text or as canonical JSON. */
const MAX_CHP_BYTES = 256 * 1024;

/** `chp_content_hash`: CHP canonical JSON and its SHA-256, computed by the same module the ledger signs with. */
export const chpContentHashTool = defineTool({
  name: "chp_content_hash",
  toolset: "governance",
  title: "CHP content hash",
  description:
    "Canonical JSON (CHP: keys sorted, no whitespace, UTF-8 as is) and its content_hash (lowercase hex SHA-256), " +
    "as receipts and the audit ledger compute them. Give JSON in `value`, or JSON text in `json` when floats " +
    'matter: 100.0 in `value` arrives parsed as the integer 100; the text "100.0" in `json` stays a float, as CHP ' +
    "hashes it. Pure computation; nothing is recorded.",
  input: z
    .strictObject({
      value: z.json().optional().describe("Any JSON value"),
      json: z
        .string()
        .max(MAX_CHP_BYTES, `must be at most ${MAX_CHP_BYTES} characters`)
        .optional()
        .describe("JSON text, keeping float notation; instead of value"),
    })
    .superRefine((args, ctx) => {
      if ((args.value === undefined) === (args.json === undefined)) {
        ctx.addIssue({ code: "custom", path: ["value"], message: "give exactly one of value or json" });
      }
    }),
  output: z.object({
    canonical_json: z.string(),
    content_hash: z.string(),
  }),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(args) {
    const field = args.json !== undefined ? "json" : "value";
    // The lossless parser recurses: text nested like a depth bomb must be refused before it reads it.
    if (args.json !== undefined && scanJsonText(args.json, { maxDepth: MAX_JSON_DEPTH }).tooDeep) {
      throw new ChaosError("invalid_argument", `json: the JSON text nests deeper than ${MAX_JSON_DEPTH} levels`);
    }
    let value: unknown;
    let canonical: string;
    try {
      value = args.json !== undefined ? parseChpJson(args.json) : args.value;
      canonical = canonicalJson(value);
    } catch (err) {
      const e = ChaosError.from(err);
      throw new ChaosError(e.code, `${field}: ${e.message}`, { cause: err });
    }
    if (Buffer.byteLength(canonical, "utf8") > MAX_CHP_BYTES) {
      throw new ChaosError("invalid_argument", `${field}: the canonical JSON is larger than ${MAX_CHP_BYTES} bytes`);
    }
    return { canonical_json: canonical, content_hash: contentHash(value) };
  },
});
