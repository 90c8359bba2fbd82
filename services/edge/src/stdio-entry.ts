/**
 * `@chaos-core/edge/stdio`: the edge without its HTTP transport, for a process that serves
 * stdio. The package index also loads express and the SDK's Streamable HTTP transport, about a
 * tenth of what a stdio server loads before it can answer `initialize`.
 */
export { loadEdgeConfig } from "./config.js";
export { checkContractsAtStart } from "./contracts/start.js";
export type { EdgeAttestation } from "./deps/edge-deps.js";
export type { EdgeConfig } from "./config.js";
export type { EdgeDeps } from "./deps/edge-deps.js";
export type { CredentialDirectory } from "./auth/directory.js";
export type { OperatorAccess } from "./deps/edge-deps.js";
export type { ConsoleLinks } from "./deps/console-links.js";
export { createSignInLinks, SIGN_IN_LINK_TTL_SECONDS } from "./console/sign-in-links.js";
export type { IssuedSignInLink, SignInLinks } from "./console/sign-in-links.js";
export { createMemorySessionStore } from "./sessions/memory-store.js";
export type { SessionStore } from "./sessions/session-store.js";
export { runStdioTransport } from "./transport/stdio.js";
export { describeSpendRequest } from "./tools/governance/spend-request-text.js";
export type { RunningStdioTransport, StdioTransportOptions } from "./transport/stdio.js";
export { loadMrtrKeyring, loadOrCreateMrtrKeyring, MRTR_KEYRING_FILE } from "./mrtr/keyring.js";
export type { MrtrKeyring } from "./mrtr/keyring.js";
export { createMemoryRateLimiter } from "./limits/limiter.js";
export { NO_RATE_LIMITS } from "./limits/limits-file.js";
export type { RateLimiter } from "./limits/limiter.js";
export { loadRateLimitsFile, parseRateLimits } from "./limits/limits-file.js";
export type { RateLimits } from "./limits/limits-file.js";
export { createUpstreamCatalog, deferredUpstreamCatalog } from "./clients/upstream-catalog.js";
export type { UpstreamCatalog } from "./clients/upstream-catalog.js";
