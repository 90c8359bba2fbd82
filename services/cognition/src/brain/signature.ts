import { createHash } from "node:crypto";
import { tokenize } from "../providers/heuristic.js";

/**
 * The objective's key words: lowercase, stemmed, stopwords dropped (the heuristic ranker's
 * tokenizer), distinct, in order of first appearance.
 */
export function keyWords(objective: string): string[] {
  return [...new Set(tokenize(objective))];
}

/**
 * The objective's signature: the first 32 hex digits of the SHA-256 of its sorted distinct key
 * words. Word order, case, plurals and filler words do not change it, so "Remember the build
 * server" and "the build servers: remember" share procedures; the hash keeps the objective's
 * words out of memory keys and tags.
 */
export function objectiveSignature(objective: string): string {
  const words = keyWords(objective).sort();
  return createHash("sha256").update(words.join(" "), "utf8").digest("hex").slice(0, 32);
}
