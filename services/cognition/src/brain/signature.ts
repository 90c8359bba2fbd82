import { createHash } from "node:crypto";
import { canonicalJsonRfc8785 } from "@chaos-core/kit";
import { tokenize } from "../providers/tokens.js";
import { parseObjective } from "../providers/objective-parser.js";

/**
 * The objective's key words: lowercase, stemmed, stopwords dropped (the heuristic ranker's
 * tokenizer), distinct, in order of first appearance.
 */
export function keyWords(objective: string): string[] {
  return [...new Set(tokenize(objective))];
}

/**
 * The objective's signature, which episodes and procedures are filed under: the first 32 hex
 * digits of a SHA-256 of its normalised intent. Where the offline parser reads the objective,
 * the intent is what it read — each step's capability and input, without its wording — so
 * "store my favourite colour: blue" and "Remember that my favourite colour is blue" share
 * procedures, while "… is red" does not. Otherwise it is the sorted distinct key words: word
 * order, case, plurals and filler words do not change it. The hash keeps the objective's words
 * out of memory keys and tags.
 */
export function objectiveSignature(objective: string): string {
  const read = parseObjective(objective);
  const intent =
    read.kind === "steps" && read.steps.length > 0
      ? `intent:${canonicalJsonRfc8785(read.steps.map((s) => ({ capability: s.capability, input: s.input })))}`
      : keyWords(objective).sort().join(" ");
  return createHash("sha256").update(intent, "utf8").digest("hex").slice(0, 32);
}
