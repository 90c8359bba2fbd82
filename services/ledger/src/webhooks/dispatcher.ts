import type { Logger } from "@chaos-core/kit";
import type { WebhookConfig } from "../config.js";
import type { LeasedWebhook, WebhookOutbox } from "./outbox.js";
import { signWebhook, webhookId } from "./signature.js";

/** How often a dispatcher looks for due rows when nothing woke it. */
export const WEBHOOK_POLL_MS = 5000;
/** How long a leased row is this dispatcher's alone. */
export const WEBHOOK_LEASE_SECONDS = 30;
/** Most rows of one tenant leased at once. */
export const WEBHOOK_BATCH = 20;

/** Sends the outbox's events; see {@link createWebhookDispatcher}. */
export interface WebhookDispatcher {
  /**
   * Looks for due rows now: of `tenant` (after its commit wrote some), or of every tenant. Wakes
   * that come while a pass runs are coalesced into the next pass.
   */
  wake(tenant?: string): void;
  /** Starts the periodic pass. */
  start(): void;
  /** Stops: aborts attempts in flight and gives their rows back, then resolves. */
  stop(): Promise<void>;
}

/** What {@link createWebhookDispatcher} needs. */
export interface WebhookDispatcherOptions {
  readonly outbox: WebhookOutbox;
  readonly config: WebhookConfig;
  readonly logger: Logger;
  /** Sent as the User-Agent, `chaos-core/<version>`. */
  readonly version: string;
  readonly pollMs?: number;
}

/** Why an attempt failed, in words an operator can act on (never the response body). */
function failureOf(err: unknown, timeoutMs: number): string {
  if ((err as { name?: string }).name === "TimeoutError") return `no answer within ${timeoutMs} ms`;
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  return `request failed: ${cause?.code ?? cause?.message ?? (err as Error).message}`;
}

/**
 * The dispatcher: woken for a tenant after its commit wrote outbox rows or when a retry it
 * scheduled there is due, and for every tenant each {@link WEBHOOK_POLL_MS} (rows other
 * replicas wrote, or a restart found), it leases up to {@link WEBHOOK_BATCH} due rows per tenant
 * for {@link WEBHOOK_LEASE_SECONDS} (two replicas never send the same row at once) and POSTs
 * them one at a time, in ledger order, each signed for this attempt. A 2xx delivers it; anything else (another status, a
 * redirect, a timeout, a refused connection) schedules the next attempt after the configured
 * wait, and once the last has failed the row is marked failed and logged at error with its
 * `webhook-id`. Delivery is at least once: a receiver dedupes by `webhook-id`.
 */
export function createWebhookDispatcher(options: WebhookDispatcherOptions): WebhookDispatcher {
  const { outbox, config, logger } = options;
  const receiver = new URL(config.url).origin;
  const stopping = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  // What the next pass looks at: every tenant, or only those whose commits wrote rows.
  let everyTenant = false;
  const woken = new Set<string>();
  // Per tenant, the soonest retry this dispatcher scheduled: it wakes then, not at the next poll.
  const soon = new Map<string, { timer: NodeJS.Timeout; at: number }>();
  // A lease must outlive the attempt that starts near its end.
  const budgetMs = WEBHOOK_LEASE_SECONDS * 1000 - config.timeoutMs - 2000;

  async function attempt(tenant: string, row: LeasedWebhook): Promise<void> {
    const id = webhookId(tenant, row);
    let problem: string;
    try {
      const res = await fetch(config.url, {
        method: "POST",
        headers: {
          ...signWebhook(config.keys, id, row.body, new Date()),
          "content-type": "application/json",
          "user-agent": `chaos-core/${options.version}`,
        },
        body: row.body,
        // A redirect is not a delivery: the signed event goes where the operator said, or nowhere.
        redirect: "manual",
        signal: AbortSignal.any([AbortSignal.timeout(config.timeoutMs), stopping.signal]),
      });
      await res.body?.cancel().catch(() => undefined);
      if (res.status >= 200 && res.status < 300) {
        await outbox.delivered(tenant, row);
        logger.debug({ webhookId: id, attempt: row.attempts + 1 }, "webhook delivered");
        return;
      }
      problem = `HTTP ${res.status}`;
    } catch (err) {
      if (stopping.signal.aborted) {
        await outbox.release(tenant, [row]);
        return;
      }
      problem = failureOf(err, config.timeoutMs);
    }
    const made = row.attempts + 1;
    const wait = config.retrySeconds[made - 1];
    if (wait === undefined) {
      await outbox.failed(tenant, row, problem);
      logger.error({ webhookId: id, tenant, attempts: made, receiver, problem }, `webhook ${id} not delivered after ${made} attempts; giving up`);
      return;
    }
    await outbox.retry(tenant, row, wait, problem);
    // A little after the row is due by the database's clock, which set it.
    wakeIn(tenant, wait * 1000 + 50);
    logger.warn({ webhookId: id, tenant, attempt: made, receiver, problem, retryInSeconds: wait }, "webhook delivery failed; will retry");
  }

  async function deliverTenant(tenant: string): Promise<void> {
    const rows = await outbox.lease(tenant, WEBHOOK_BATCH, WEBHOOK_LEASE_SECONDS);
    const leasedAt = performance.now();
    for (let i = 0; i < rows.length; i++) {
      if (stopping.signal.aborted || performance.now() - leasedAt > budgetMs) {
        await outbox.release(tenant, rows.slice(i));
        return;
      }
      await attempt(tenant, rows[i]!);
    }
  }

  async function pass(): Promise<void> {
    let tenants = [...woken];
    const all = everyTenant;
    woken.clear();
    everyTenant = false;
    if (all) {
      try {
        tenants = await outbox.tenants();
      } catch (err) {
        logger.warn({ err }, "the webhook outbox could not be read; trying again later");
        return;
      }
    }
    for (const tenant of tenants) {
      if (stopping.signal.aborted) return;
      try {
        await deliverTenant(tenant);
      } catch (err) {
        logger.warn({ err, tenant }, "the webhook outbox could not be updated; trying again later");
      }
    }
  }

  function wakeIn(tenant: string, ms: number): void {
    const at = performance.now() + ms;
    const set = soon.get(tenant);
    if (stopping.signal.aborted || (set && set.at <= at)) return;
    if (set) clearTimeout(set.timer);
    const timer = setTimeout(() => {
      soon.delete(tenant);
      wake(tenant);
    }, ms);
    timer.unref();
    soon.set(tenant, { timer, at });
  }

  function run(): void {
    if (running || stopping.signal.aborted || (!everyTenant && woken.size === 0)) return;
    running = pass().finally(() => {
      running = undefined;
      // Wakes that came during this pass, even while it was finishing, are not lost.
      run();
    });
  }

  function wake(tenant?: string): void {
    if (stopping.signal.aborted) return;
    if (tenant === undefined) everyTenant = true;
    else woken.add(tenant);
    run();
  }

  return {
    wake,
    start() {
      if (timer || stopping.signal.aborted) return;
      logger.info({ receiver, retries: config.retrySeconds.length, timeoutMs: config.timeoutMs }, "webhook notifications on");
      timer = setInterval(() => wake(), options.pollMs ?? WEBHOOK_POLL_MS);
      timer.unref();
      wake();
    },
    async stop() {
      if (timer) clearInterval(timer);
      for (const { timer: t } of soon.values()) clearTimeout(t);
      soon.clear();
      timer = undefined;
      stopping.abort();
      await running;
    },
  };
}
