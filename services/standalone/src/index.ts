export { main } from "./cli.js";
export { loadStandaloneConfig } from "./config.js";
export type { StandaloneConfig } from "./config.js";
export { createRuntime } from "./runtime.js";
export type { Runtime } from "./runtime.js";
