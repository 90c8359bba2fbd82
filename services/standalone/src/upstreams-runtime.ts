import { createUpstreamPool, loadUpstreams, upstreamCapabilities, type Capability, type UpstreamPool } from "@chaos-core/cognition";
import type { Logger } from "@chaos-core/kit";
import type { UpstreamsConfig } from "./config.js";

/** The operator's upstreams, as this process serves them (docs/federation.md). */
export interface ServedUpstreams {
  /** Each pinned tool of each declared upstream, as a capability. */
  readonly capabilities: readonly Capability[];
  /** The connections, opened on first use; closed with the process. */
  readonly pool: UpstreamPool;
  /** For the start-up line a person reads. */
  readonly summary: string;
}

/**
 * Reads the operator's upstreams and their pins, and makes each pinned tool a capability served
 * through one pool. A declared upstream that is not pinned serves nothing, and says so once.
 */
export async function serveUpstreams(config: UpstreamsConfig, version: string, logger: Logger): Promise<ServedUpstreams> {
  const { declarations, pins } = await loadUpstreams({ file: config.file, required: config.fileChosen, lock: config.lock });
  const log = logger.child({ service: "upstreams" });
  const pool = createUpstreamPool({ connect: { secrets: config.secrets, workDir: config.workDir, version }, logger: log });
  const { capabilities, unpinned } = upstreamCapabilities(declarations, pins, pool);
  for (const upstream of unpinned) log.warn({ upstream, lock: config.lock }, "this upstream serves nothing until it is pinned: run chaos-core upstreams lock");
  const served = new Set(capabilities.map((c) => c.upstream?.name));
  const summary = declarations.length === 0 ? "none" : `${capabilities.length} tools of ${served.size} pinned upstreams (${config.file})`;
  return { capabilities, pool, summary };
}
