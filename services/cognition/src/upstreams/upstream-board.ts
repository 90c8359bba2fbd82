import { createHash } from "node:crypto";
import type { Redis } from "ioredis";
import type { Logger } from "@chaos-core/kit";

/**
 * A quarantine one replica found, as every replica reads it (docs/federation.md §4, "Across
 * replicas"): the tool, why, and the pin it drifted from — a record whose pin is no longer the
 * one in force (an approval re-pinned it) holds nothing.
 */
export interface SharedQuarantine {
  readonly upstream: string;
  readonly tool: string;
  /** The refusal's words: `upstreams/<upstream>/<tool> (<sections>): <verdict>`. */
  readonly why: string;
  /** The digest of the pin it drifted from. */
  readonly pinnedDigest: string;
  /** When it was found (ms since the epoch): a replica that read the upstream after it and found it as pinned withdraws it. */
  readonly at: number;
}

/**
 * A breaker one replica opened, as every replica reads it (docs/federation-platform.md §7): the
 * pool entry it stands for, until when calls fail at once, and when it was opened (what a replica
 * closing it names, so a breaker opened again meanwhile stays open).
 */
export interface SharedBreaker {
  readonly upstream: string;
  /** The pool's scope: `shared`, or a tenant. */
  readonly scope: string;
  readonly openUntil: number;
  readonly failures: number;
  readonly at: number;
}

export const breakerKey = (upstream: string, scope: string) => `${upstream}\u0000${scope}`;

/**
 * What the cognition replicas share about one set of upstreams (the operator's file, or a
 * tenant's own): its quarantines — a tool one replica finds drifted is refused by all of them at
 * once, not each when it happens to read the upstream again, and a change is recorded by the
 * first replica to claim it, not once per replica — and its open breakers, so every replica fails
 * a call to an upstream another found failing at once, and closes it when another's probe got
 * through.
 */
export interface UpstreamBoard {
  /** Where it lives, for the start-up line. */
  readonly kind: string;
  /** Every breaker open now, by {@link breakerKey} (kept current as replicas change them). */
  breakers(): ReadonlyMap<string, SharedBreaker>;
  /** Opens a breaker for every replica. */
  openBreaker(breaker: SharedBreaker): Promise<void>;
  /** Closes a breaker for every replica, if it is still the one opened at `at`. */
  closeBreaker(upstream: string, scope: string, at: number): Promise<void>;
  /** Every quarantine recorded now, by `upstream\u0000tool` (kept current as replicas change it). */
  current(): ReadonlyMap<string, SharedQuarantine>;
  /** Records a quarantine for every replica. */
  put(quarantine: SharedQuarantine): Promise<void>;
  /** Withdraws the quarantine of a tool, if it is still the one that drifted from `pinnedDigest`. */
  withdraw(upstream: string, tool: string, pinnedDigest: string): Promise<void>;
  /**
   * Whether this replica is the first to claim `change` (a drift event's identity): only the
   * first records it in the ledger. Resolves true when the board cannot say (better twice than never).
   */
  claim(change: string): Promise<boolean>;
  /** Called after the records changed (another replica put or withdrew one). */
  onChange(listener: () => void): void;
}

export const quarantineKey = (upstream: string, tool: string) => `${upstream}\u0000${tool}`;

/** How long a claimed change stays claimed: longer than any replica takes to see the same change. */
const CLAIM_TTL_MS = 24 * 60 * 60_000;
/** The records are read again this often too, in case a message was missed (Redis pub/sub keeps none). */
const RELOAD_MS = 30_000;

/** A record of the board as written (JSON of `T` whose fields have these types), stored under its own key; undefined otherwise. */
function parsedRecord<T>(field: string, value: string, types: Record<keyof T & string, "string" | "number">, keyOf: (record: T) => string): T | undefined {
  try {
    const record = JSON.parse(value) as Record<string, unknown>;
    if (Object.entries(types).some(([name, type]) => typeof record[name] !== type)) return undefined;
    return keyOf(record as T) === field ? (record as T) : undefined;
  } catch {
    return undefined;
  }
}

const parsedBreaker = (field: string, value: string) =>
  parsedRecord<SharedBreaker>(field, value, { upstream: "string", scope: "string", openUntil: "number", failures: "number", at: "number" }, (b) => breakerKey(b.upstream, b.scope));
const parsed = (field: string, value: string) =>
  parsedRecord<SharedQuarantine>(field, value, { upstream: "string", tool: "string", why: "string", pinnedDigest: "string", at: "number" }, (q) => quarantineKey(q.upstream, q.tool));

/** The boards of one process, one per set of upstreams (`operator`, or a tenant's own), over one Redis subscriber. */
export interface UpstreamBoards {
  /** The board of `scope`, read now (the first time) and kept current from then on. */
  board(scope: string): Promise<UpstreamBoard>;
  close(): Promise<void>;
}

/**
 * The boards in Redis: per scope a hash of the quarantines (`<prefix>upstream-quarantine:{<scope>}`),
 * one of the open breakers (`…:breakers`) and a channel every replica listens on (one duplicate connection for every scope; each read
 * again after a reconnect and every 30 s), and `SET NX` claims. A record that cannot be written is
 * logged: the replica that found it still refuses the tool, and every other replica finds it when
 * it reads the upstream again.
 */
export async function createRedisUpstreamBoards(redis: Redis, options: { prefix: string; logger: Logger }): Promise<UpstreamBoards> {
  const { logger } = options;
  const boards = new Map<string, { board: Promise<UpstreamBoard>; reload: () => Promise<void> }>();
  const byChannel = new Map<string, () => Promise<void>>();
  const subscriber = redis.duplicate({ connectionName: "chaos-core-upstream-quarantine", lazyConnect: true });
  subscriber.on("error", () => {});
  subscriber.on("message", (channel: string) => void byChannel.get(channel)?.());
  const listen = (channel: string) =>
    subscriber.subscribe(channel).catch((err: unknown) => logger.warn({ err: (err as Error).message }, "listening for shared upstream quarantines failed; retrying on reconnect"));
  subscriber.on("ready", () => {
    for (const [channel, reload] of byChannel) void listen(channel).then(reload);
  });
  await subscriber.connect();
  const timer = setInterval(() => {
    for (const { reload } of boards.values()) void reload();
  }, RELOAD_MS).unref();

  const open = async (scope: string, reloadOf: (reload: () => Promise<void>) => void): Promise<UpstreamBoard> => {
    const hash = `${options.prefix}upstream-quarantine:{${scope}}`;
    const breakerHash = `${hash}:breakers`;
    const channel = `${hash}:changed`;
    let records = new Map<string, SharedQuarantine>();
    let breakers = new Map<string, SharedBreaker>();
    const listeners: Array<() => void> = [];
    const reload = async () => {
      try {
        const [all, open] = await Promise.all([redis.hgetall(hash), redis.hgetall(breakerHash)]);
        const nextBreakers = new Map<string, SharedBreaker>();
        for (const [field, value] of Object.entries(open)) {
          const b = parsedBreaker(field, value);
          if (b) nextBreakers.set(field, b);
        }
        breakers = nextBreakers;
        const next = new Map<string, SharedQuarantine>();
        for (const [field, value] of Object.entries(all)) {
          const q = parsed(field, value);
          if (q) next.set(field, q);
        }
        const changed = next.size !== records.size || [...next].some(([k, q]) => records.get(k)?.why !== q.why || records.get(k)?.pinnedDigest !== q.pinnedDigest);
        records = next;
        if (changed) for (const listener of listeners) listener();
      } catch (err) {
        logger.warn({ err: (err as Error).message, scope }, "the shared upstream quarantines could not be read; the last read stays");
      }
    };
    reloadOf(reload);
    byChannel.set(channel, reload);
    await listen(channel);
    await reload();
    const announce = async () => {
      await redis.publish(channel, "1");
    };
    return {
      kind: "redis",
      current: () => records,
      breakers: () => breakers,
      async openBreaker(b) {
        try {
          await redis.hset(breakerHash, breakerKey(b.upstream, b.scope), JSON.stringify(b));
          await announce();
        } catch (err) {
          logger.warn({ err: (err as Error).message, scope, upstream: b.upstream }, "an open breaker could not be shared with the other replicas; each opens its own as calls fail");
        }
      },
      async closeBreaker(upstream, breakerScope, at) {
        try {
          // Only the breaker opened at `at`: one opened again since (a failed probe elsewhere) stays.
          const removed = (await redis.eval(
            "local v = redis.call('HGET', KEYS[1], ARGV[1]) if v and cjson.decode(v).at == tonumber(ARGV[2]) then return redis.call('HDEL', KEYS[1], ARGV[1]) end return 0",
            1,
            breakerHash,
            breakerKey(upstream, breakerScope),
            String(at),
          )) as number;
          if (removed > 0) await announce();
        } catch (err) {
          logger.warn({ err: (err as Error).message, scope, upstream }, "a closed breaker could not be shared with the other replicas; theirs let a probe through when it expires");
        }
      },
      async put(q) {
        try {
          await redis.hset(hash, quarantineKey(q.upstream, q.tool), JSON.stringify(q));
          await announce();
        } catch (err) {
          logger.error({ err: (err as Error).message, scope, upstream: q.upstream, tool: q.tool }, "a quarantine could not be shared with the other replicas; they find it when they read the upstream again");
        }
      },
      async withdraw(upstream, tool, pinnedDigest) {
        const field = quarantineKey(upstream, tool);
        try {
          // Only the record of that pin: a newer one (drifted from a newer pin) stays.
          const removed = (await redis.eval(
            "local v = redis.call('HGET', KEYS[1], ARGV[1]) if v and cjson.decode(v).pinnedDigest == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end return 0",
            1,
            hash,
            field,
            pinnedDigest,
          )) as number;
          if (removed > 0) await announce();
        } catch (err) {
          logger.error({ err: (err as Error).message, scope, upstream, tool }, "a shared quarantine could not be withdrawn; it holds until it is, or an approval re-pins the tool");
        }
      },
      async claim(change) {
        const digest = createHash("sha256").update(change, "utf8").digest("hex");
        try {
          return (await redis.set(`${hash}:claimed:${digest}`, "1", "PX", CLAIM_TTL_MS, "NX")) !== null;
        } catch {
          return true;
        }
      },
      onChange(listener) {
        listeners.push(listener);
      },
    };
  };

  return {
    board(scope) {
      let entry = boards.get(scope);
      if (!entry) {
        const made: { board?: Promise<UpstreamBoard>; reload: () => Promise<void> } = { reload: async () => {} };
        made.board = open(scope, (reload) => (made.reload = reload));
        entry = made as { board: Promise<UpstreamBoard>; reload: () => Promise<void> };
        boards.set(scope, entry);
      }
      return entry.board;
    },
    async close() {
      clearInterval(timer);
      subscriber.disconnect();
    },
  };
}
