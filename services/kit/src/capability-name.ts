/**
 * A capability name: lowercase dotted segments (`http.request`, `memory.recall`). Cognition's
 * registry accepts only such names and the policy service's documents list only such names, so
 * every registered capability can be named in a policy and matched exactly: there are no
 * wildcards, because a pattern would make it ambiguous which rule a future capability falls
 * under, and an ambiguous policy is denied rather than guessed. Defined once, here, for both.
 */
export const CAPABILITY_NAME_RE = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$/;
