import type { PolicyDocumentJson } from "./policy-document.js";

/** One version of a tenant's policy, as a store serves it. */
export interface PolicySnapshot {
  readonly document: PolicyDocumentJson;
  /**
   * Increases by exactly one with each stored change, per tenant. 0 means the tenant has never
   * stored a document and the safe default is in force.
   */
  readonly version: number;
  /** When this version was stored (the Unix epoch for the never-stored default). */
  readonly updatedAt: Date;
  /** Where the document lives, e.g. `file:/data/policy.json` or `postgres`. */
  readonly source: string;
  /**
   * Set when the latest edit of the stored document could not be loaded (a bad file); it
   * names the file and the field. `document` and `version` are then the last good ones.
   */
  readonly lastError?: string;
}

/**
 * Where per-tenant, versioned policy documents live. Implementations: Postgres/PGlite
 * (`createSqlPolicyStore`) and the standalone `policy.json` file (`createFilePolicyStore`);
 * both pass the same contract suite.
 */
export interface PolicyStore {
  /** The tenant's current policy; the safe default at version 0 when it never stored one. */
  get(tenant: string): Promise<PolicySnapshot>;
  /**
   * Stores a new version and returns its number (the previous version + 1).
   * @param expectedVersion optimistic concurrency: the version the caller read (0 = "nothing
   *   stored yet"); undefined skips the check. A mismatch throws a `conflict` ChaosError.
   */
  put(tenant: string, document: PolicyDocumentJson, expectedVersion?: number): Promise<number>;
  /**
   * The current snapshot, then each newer version as it is observed, in increasing version
   * order (versions that land between two observations may be skipped, none repeats). Ends
   * when `signal` aborts or the store closes.
   */
  watch(tenant: string, signal: AbortSignal): AsyncIterable<PolicySnapshot>;
  /** Stops background work (watchers, polls); does not close a database it was given. */
  close(): Promise<void>;
}
