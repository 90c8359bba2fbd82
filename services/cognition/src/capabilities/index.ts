import type { Capability } from "./capability.js";
import { generateTextCapability } from "./generate-text.js";
import { httpRequestCapability } from "./http-request.js";
import { memoryEpisodeCapability } from "./memory-episode.js";
import { memoryForgetCapability } from "./memory-forget.js";
import { memoryRecallCapability } from "./memory-recall.js";
import { memoryRememberCapability } from "./memory-remember.js";

/**
 * Every built-in capability: the one list the registry is built from. Adding a capability is
 * one file plus one line here; nothing in the executor, policy, edge or a transport changes.
 * `memory.episode` is internal (the brain's bookkeeping): listed, never planned.
 */
export const BUILT_IN_CAPABILITIES: readonly Capability[] = Object.freeze([
  generateTextCapability,
  memoryRememberCapability,
  memoryRecallCapability,
  memoryForgetCapability,
  httpRequestCapability,
  memoryEpisodeCapability,
]);
