import { canonicalJson, canonicalJsonAndHash, contentHash } from "@chaos-core/kit";

// Cognition hashes calls with the project's one CHP canonical JSON (kit), so an approval's
// argsHash and a ledger receipt's args_hash are the same function of the same input.
export { canonicalJson, canonicalJsonAndHash };

/**
 * The hash an approval (and later a receipt) is bound to: CHP `contentHash` (lowercase hex
 * SHA-256 of the canonical JSON) of a step's validated input. Validated, so fields the schema
 * strips (such as an agent's `confirmed: true`) are not part of the call and cannot change its
 * hash.
 */
export function argsHash(validatedInput: unknown): string {
  return contentHash(validatedInput);
}
