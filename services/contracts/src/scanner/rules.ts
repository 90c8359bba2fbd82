/**
 * What the entitlement scanner classifies, in one place: Node's modules by category, the global
 * APIs that reach the network or evaluate code, npm packages that open connections, the fs calls
 * that write, and which typed-client RPCs are the executor and the approval path.
 */

export type Category = "filesystem" | "network" | "subprocess" | "crypto" | "codeEvaluation";

/** Node's built-in modules (without `node:`) and what using them is. */
export const NODE_MODULES: Readonly<Record<string, Category>> = {
  fs: "filesystem",
  "fs/promises": "filesystem",
  net: "network",
  tls: "network",
  dgram: "network",
  dns: "network",
  "dns/promises": "network",
  http: "network",
  https: "network",
  http2: "network",
  child_process: "subprocess",
  worker_threads: "subprocess",
  cluster: "subprocess",
  crypto: "crypto",
  vm: "codeEvaluation",
};

/** Globals that reach the network without an import. */
export const GLOBAL_NETWORK: ReadonlySet<string> = new Set(["fetch", "WebSocket", "EventSource", "XMLHttpRequest"]);

/**
 * npm packages that open connections or write files, by package name, and the exports that do
 * it (constructing a client, a pool, a server): their constants and types (grpc's status codes,
 * `Metadata`) connect nothing.
 */
export const PACKAGES: Readonly<Record<string, { category: Category; apis: readonly string[]; write?: boolean }>> = {
  pg: { category: "network", apis: ["Client", "Pool", "Connection"] },
  ioredis: { category: "network", apis: ["Redis", "Cluster", "default"] },
  undici: { category: "network", apis: ["fetch", "request", "stream", "connect", "Agent", "Pool", "Client", "WebSocket"] },
  "@grpc/grpc-js": { category: "network", apis: ["Client", "Server", "Channel", "makeClientConstructor", "makeGenericClientConstructor", "loadPackageDefinition"] },
  express: { category: "network", apis: ["default", "e", "express"] },
  ws: { category: "network", apis: ["WebSocket", "WebSocketServer", "default"] },
  axios: { category: "network", apis: ["default", "axios", "create", "request", "get", "post", "put", "delete"] },
  "node-fetch": { category: "network", apis: ["default", "fetch"] },
  execa: { category: "subprocess", apis: ["execa", "execaSync", "execaCommand", "execaNode", "$"] },
  "@electric-sql/pglite": { category: "filesystem", apis: ["PGlite"], write: true },
};

/** fs functions (sync, callback and promise forms share a name) that change the file system. */
export const FS_WRITES: ReadonlySet<string> = new Set([
  "writeFile",
  "appendFile",
  "mkdir",
  "mkdtemp",
  "rm",
  "rmdir",
  "unlink",
  "rename",
  "copyFile",
  "cp",
  "createWriteStream",
  "truncate",
  "ftruncate",
  "chmod",
  "fchmod",
  "lchmod",
  "chown",
  "fchown",
  "lchown",
  "symlink",
  "link",
  "utimes",
  "futimes",
  "lutimes",
  "open",
  "write",
  "writev",
]);

/** RPCs of the typed clients that run a step through cognition's executor. */
export const EXECUTOR_METHODS: ReadonlySet<string> = new Set(["cognition.execute", "cognition.executeStream", "cognition.achieve"]);

/** RPCs of the typed clients that are the human-approval and receipt path. */
export const APPROVAL_METHODS: ReadonlySet<string> = new Set([
  "cognition.getApproval",
  "cognition.resolveApproval",
  "ledger.authorize",
  "ledger.requestAuthorization",
  "ledger.approveSpend",
  "ledger.collectSpendApproval",
  "ledger.executeReferenceTool",
]);

/** Functions that run a capability by name: the argument at `argIndex` is the capability. */
export const CAPABILITY_RUNNERS: ReadonlyArray<{ readonly name: string; readonly argIndex: number }> = [{ name: "runCapability", argIndex: 1 }];

/** A string literal at least this long, without whitespace, is checked for entropy. */
export const ENTROPY_MIN_LENGTH = 40;
/** Shannon entropy (bits per character) at or above which such a literal is a signal. */
export const ENTROPY_THRESHOLD = 4.5;

/** Shannon entropy of a string, in bits per character. */
export function shannonEntropy(s: string): number {
  const counts = new Map<string, number>();
  for (const ch of s) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  const n = [...s].length;
  let h = 0;
  for (const c of counts.values()) h -= (c / n) * Math.log2(c / n);
  return h;
}

/** A long literal without whitespace whose characters are nearly random (an encoded blob). */
export function isHighEntropyLiteral(s: string): boolean {
  return s.length >= ENTROPY_MIN_LENGTH && !/\s/.test(s) && shannonEntropy(s) >= ENTROPY_THRESHOLD;
}
