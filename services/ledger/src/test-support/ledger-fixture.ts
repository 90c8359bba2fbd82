/**
 * A real ledger for tests: a migrated database on the test Postgres, a generated Ed25519
 * keyring, operator policies, a nonce cache (Redis by default), the policy service that chooses
 * approval channels (its real handlers on the same database, unless a test passes its own) and
 * the LedgerService handlers behind an in-process client. No fakes: the same core the ledger
 * main serves.
 *
 * ```ts
 * const ledger = await createLedgerFixture({ policies: { defaults: { tool_approval: myPolicy } } });
 * const ctx = { ctx: { tenant: "acme", principal: "agent@acme" } };
 * await ledger.client.evaluateToolApproval({ call }, ctx);
 * // ... a restart of every process: same database and keys, fresh instances, empty cache
 * const again = await ledger.restart({ flushNonceCache: true });
 * await again.close(); await ledger.close();
 * ```
 *
 * Excluded from the build (test-only: it imports `test/support`).
 */
import { randomBytes } from "node:crypto";
import { createInProcessClient, createLogger, createPostgresDb, type Db, type Logger, type ServiceClient } from "@chaos-core/kit";
import { createPolicyHandlers, createSqlPolicyStore, migratePolicy, policyDocumentToProto, validatePolicyDocument } from "@chaos-core/policy";
import { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { Redis } from "ioredis";
import { createTestDatabase, type TestDatabase } from "../../../../test/support/postgres.js";
import { TEST_REDIS_URL } from "../../../../test/support/redis.js";
import { createMemoryNonceCache, createRedisNonceCache, type NonceCache } from "../adapters/nonce-cache.js";
import type { WebhookConfig } from "../config.js";
import { createLedgerHandlers } from "../handlers/ledger-handlers.js";
import { createKeyring, generateSigningKey, type Keyring } from "../keys/keyring.js";
import { migrateLedger } from "../log/migrations.js";
import { createLedgerCore } from "../service/create-core.js";
import type { LedgerCore } from "../service/ledger-core.js";
import { parseOperatorPolicies, type OperatorPolicies } from "../adapters/operator-policies.js";

/** How a fixture's nonce fast path is kept. */
export type FixtureNonces = "redis" | "memory" | NonceCache;

/** Options of {@link createLedgerFixture}; everything has a default. */
export interface LedgerFixtureOptions {
  /** Prefix of the test database's name (default `chaoscore_ledger_fixture`). */
  readonly name?: string;
  /**
   * Operator policies: a policy document as in `CHAOS_CORE_LEDGER_POLICY_FILE`
   * (`{defaults: {spend_policies, tool_approval}, tenants: {...}}`) or a ready
   * {@link OperatorPolicies}. Default `{}`: the reference spend policies and no tool-approval
   * policy (every tool-approval check is then `ambiguous_policy`).
   */
  readonly policies?: unknown;
  /** The keyring; default a freshly generated Ed25519 key. */
  readonly keyring?: Keyring;
  /**
   * `"redis"` (default: the test Redis with a key prefix unique to this fixture), `"memory"`,
   * or a cache of your own (e.g. one on a Redis that is down).
   */
  readonly nonces?: FixtureNonces;
  /** The clock of receipts, decisions and entry timestamps. */
  readonly now?: () => Date;
  /** Use this database instead of creating one; it is not dropped by `close`. */
  readonly database?: TestDatabase;
  /** Use this Db instead of opening a pool on the database (closed by the caller, not `close`). */
  readonly db?: Db;
  /** Redis key prefix (default unique per fixture); a restart keeps it. */
  readonly redisPrefix?: string;
  /**
   * The policy service the ledger asks for approval channels; default its real handlers on this
   * fixture's database (every tenant starts on the default policy document). A restart keeps it.
   */
  readonly policy?: ServiceClient<typeof PolicyService>;
  /** Signed approval notifications, as `CHAOS_CORE_WEBHOOK_*` configure them; default off. A restart keeps them. */
  readonly webhooks?: WebhookConfig;
  /** The core's logger; default a silent one. */
  readonly logger?: Logger;
}

/** A running ledger core with its client; `close` releases everything it opened. */
export interface LedgerFixture {
  readonly core: LedgerCore;
  /** LedgerService through the in-process client (the handlers the gRPC main serves). */
  readonly client: ServiceClient<typeof LedgerService>;
  readonly keyring: Keyring;
  readonly db: Db;
  /** The test database (URL and `drop`). */
  readonly database: TestDatabase;
  readonly policies: OperatorPolicies;
  readonly nonces: NonceCache;
  /** The Redis connection behind `nonces` when it is `"redis"`. */
  readonly redis: Redis | undefined;
  /** The Redis key prefix of the nonce cache. */
  readonly redisPrefix: string;
  /** The policy service the ledger asks for approval channels. */
  readonly policy: ServiceClient<typeof PolicyService>;
  /**
   * Stores a capability policy document for a tenant, as an operator does, in policy.json's
   * vocabulary (e.g. `{approvalChannels: {spend: {policies: {wire: [...]}}}}`); returns its version.
   */
  putPolicy(tenant: string, document: Record<string, unknown>): Promise<number>;
  /**
   * New core, store, Db pool and nonce cache on the same database and keyring, as after a
   * restart of every process; `overrides` change the configuration of the new one. With
   * `flushNonceCache` every key under this fixture's Redis prefix is deleted first, so only
   * Postgres remembers. The returned fixture shares the database and does not drop it.
   */
  restart(overrides?: Omit<LedgerFixtureOptions, "database"> & { flushNonceCache?: boolean }): Promise<LedgerFixture>;
  /** Deletes every Redis key under this fixture's prefix; returns how many there were. */
  flushNonceCache(): Promise<number>;
  /** Waits for queued appends, closes Redis and the Db pool, and drops the database if it created it. */
  close(): Promise<void>;
}

function policiesOf(value: unknown): OperatorPolicies {
  if (value !== null && typeof value === "object" && typeof (value as OperatorPolicies).forTenant === "function") {
    return value as OperatorPolicies;
  }
  return parseOperatorPolicies(value ?? {}, "test policies");
}

async function deleteByPrefix(redis: Redis, prefix: string): Promise<number> {
  let deleted = 0;
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 500);
    cursor = next;
    if (keys.length > 0) deleted += await redis.del(...keys);
  } while (cursor !== "0");
  return deleted;
}

/**
 * Creates a migrated ledger on a fresh test database (or `options.database`) and returns the
 * core, an in-process LedgerService client and what it was built from.
 */
export async function createLedgerFixture(options: LedgerFixtureOptions = {}): Promise<LedgerFixture> {
  const ownsDatabase = options.database === undefined;
  const database = options.database ?? (await createTestDatabase(options.name ?? "chaoscore_ledger_fixture"));
  const ownsDb = options.db === undefined;
  const db = options.db ?? createPostgresDb({ connectionString: database.url, applicationName: "chaos-core-ledger-test" });
  const redisPrefix = options.redisPrefix ?? `test:ledger:${randomBytes(4).toString("hex")}:`;
  let redis: Redis | undefined;
  let closePolicy = async () => {};
  try {
    await migrateLedger(db);
    let policy = options.policy;
    if (!policy) {
      await migratePolicy(db);
      const store = createSqlPolicyStore(db);
      closePolicy = () => store.close();
      policy = createInProcessClient(PolicyService, createPolicyHandlers(store));
    }
    const policyClient = policy;
    const keyring = options.keyring ?? createKeyring(generateSigningKey());
    const policies = policiesOf(options.policies);
    const choice = options.nonces ?? "redis";
    let nonces: NonceCache;
    if (choice === "redis") {
      redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1, lazyConnect: true });
      await redis.connect();
      nonces = createRedisNonceCache(redis, { prefix: redisPrefix });
    } else if (choice === "memory") {
      nonces = createMemoryNonceCache();
    } else {
      nonces = choice;
    }
    const logger = options.logger ?? createLogger("ledger-test", "silent");
    const core = createLedgerCore({
      db,
      keyring,
      policies,
      nonces,
      policy,
      logger,
      version: "test",
      ...(options.webhooks ? { webhooks: options.webhooks } : {}),
      ...(options.now ? { now: options.now } : {}),
    });
    const client = createInProcessClient(LedgerService, createLedgerHandlers(core));
    const opened = redis;

    const fixture: LedgerFixture = {
      core,
      client,
      keyring,
      db,
      database,
      policies,
      nonces,
      redis: opened,
      redisPrefix,
      policy,
      async putPolicy(tenant, document) {
        const res = await policyClient.putPolicy(
          { document: policyDocumentToProto(validatePolicyDocument(document, "test policy")) },
          { ctx: { tenant, principal: "operator" } },
        );
        return Number(res.version);
      },
      async flushNonceCache() {
        if (opened) return deleteByPrefix(opened, redisPrefix);
        const r = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
        try {
          return await deleteByPrefix(r, redisPrefix);
        } finally {
          r.disconnect();
        }
      },
      async restart(overrides = {}) {
        const { flushNonceCache, ...rest } = overrides;
        if (flushNonceCache) await fixture.flushNonceCache();
        return createLedgerFixture({
          keyring,
          policies,
          redisPrefix,
          policy,
          ...(options.now ? { now: options.now } : {}),
          ...(options.webhooks ? { webhooks: options.webhooks } : {}),
          ...(typeof choice === "object" ? {} : { nonces: choice }),
          ...rest,
          database,
        });
      },
      async close() {
        await core.close().catch(() => undefined);
        await core.store.close().catch(() => undefined);
        await closePolicy();
        if (opened) {
          if (ownsDatabase) await deleteByPrefix(opened, redisPrefix).catch(() => undefined);
          opened.disconnect();
        }
        if (ownsDb) await db.close();
        if (ownsDatabase) await database.drop();
      },
    };
    return fixture;
  } catch (err) {
    await closePolicy().catch(() => undefined);
    redis?.disconnect();
    if (ownsDb) await db.close().catch(() => undefined);
    if (ownsDatabase) await database.drop().catch(() => undefined);
    throw err;
  }
}
