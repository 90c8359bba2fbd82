/**
 * `@chaos-core/edge/relay`: what a `chaos-core stdio` process needs to relay its host's connection
 * to the process that serves the data directory, or to refuse it with a reason the host shows.
 * It loads neither the edge's server nor any service: a relay answers as fast as it can forward.
 */
export { runStdioRefusal, runStdioRelay } from "./transport/stdio-relay.js";
export type { StdioRelayOptions } from "./transport/stdio-relay.js";
export type { RunningStdioTransport } from "./transport/stdio.js";
