import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordingLogger } from "../../../test/support/logger.js";
import { startPrivateRedis, TEST_REDIS_URL, uniquePrefix, type PrivateRedis } from "../../../test/support/redis.js";
import { createLogger } from "./logger.js";
import { closeRedis, connectRedis } from "./redis.js";
import { announcedChange, createMemoryTenantGenerations, createRedisTenantGenerations, type TenantChangeListener } from "./tenant-generations.js";

const quiet = createLogger("kit-generations-test", "silent");

async function until(check: () => boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A watcher that keeps what it is told. */
function hearing() {
  const heard: Array<[string, number]> = [];
  let missed = 0;
  const listener: TenantChangeListener = { changed: (tenant, generation) => void heard.push([tenant, generation]), missed: () => void missed++ };
  return {
    heard,
    listener,
    get missed() {
      return missed;
    },
  };
}

describe("tenant change announcements in one process", () => {
  it("reach every watcher, past one that throws, and stop reaching a watcher that stopped", async () => {
    const { logger, lines } = recordingLogger();
    const generations = createMemoryTenantGenerations({ logger });
    const one = hearing();
    const two = hearing();
    const stopOne = await generations.watch(one.listener);
    await generations.watch({ changed: () => { throw new Error("listener broke"); } });
    await generations.watch(two.listener);
    await generations.announce("acme", 3);
    expect(one.heard).toEqual([["acme", 3]]);
    expect(two.heard).toEqual([["acme", 3]]);
    expect(lines.find((l) => l["msg"] === "a listener of tenant changes failed")).toMatchObject({ tenant: "acme", err: "listener broke" });
    await stopOne();
    await generations.announce("bravo", 9);
    expect(one.heard).toEqual([["acme", 3]]);
    expect(two.heard).toEqual([["acme", 3], ["bravo", 9]]);
  });

  it("are made once the change's transaction resolved, with the generation it published; a change that fails is not announced", async () => {
    const generations = createMemoryTenantGenerations();
    const order: string[] = [];
    await generations.watch({ changed: (tenant, generation) => void order.push(`announced ${tenant}@${generation}`) });
    const made = await announcedChange(generations, "acme", async (publish) => {
      await publish(4);
      order.push(`published ${String(await generations.get("acme"))}`);
      await new Promise((r) => setTimeout(r, 20));
      order.push("committed");
      return "made";
    });
    expect(made).toBe("made");
    expect(order).toEqual(["published 4", "committed", "announced acme@4"]);

    order.length = 0;
    const failed = announcedChange(generations, "acme", async (publish) => {
      await publish(5);
      throw new Error("the commit failed");
    });
    await expect(failed).rejects.toThrow("the commit failed");
    // Published already (edges re-read, harmlessly), but nothing is announced for a change not made.
    expect(order).toEqual([]);
    // A transaction that published nothing (it changed nothing) announces nothing either.
    await announcedChange(generations, "acme", async () => "read only");
    expect(order).toEqual([]);
  });
});

describe("tenant change announcements over Redis", () => {
  const prefix = uniquePrefix("tenant-changes");
  let a: Redis;
  let b: Redis;
  beforeAll(async () => {
    a = await connectRedis(TEST_REDIS_URL, { logger: quiet, name: "generations-test-a" });
    b = await connectRedis(TEST_REDIS_URL, { logger: quiet, name: "generations-test-b" });
  });
  afterAll(async () => {
    const keys = await a.keys(`${prefix}*`);
    if (keys.length > 0) await a.del(...keys);
    await closeRedis(a);
    await closeRedis(b);
  });

  it("announced on one connection are heard on another, on the channel of their prefix only; a message that is no announcement is dropped", async () => {
    const { logger, lines } = recordingLogger();
    const publisher = createRedisTenantGenerations(a, { prefix, logger });
    const ours = hearing();
    const theirs = hearing();
    const stopOurs = await createRedisTenantGenerations(b, { prefix, logger }).watch(ours.listener);
    const stopTheirs = await createRedisTenantGenerations(b, { prefix: uniquePrefix("other-cluster"), logger }).watch(theirs.listener);
    try {
      await announcedChange(publisher, "acme", async (publish) => publish(7));
      expect(await publisher.get("acme")).toBe(7);
      await until(() => ours.heard.length === 1, "the announcement");
      expect(ours.heard).toEqual([["acme", 7]]);

      await a.publish(`${prefix}tenant-changes`, JSON.stringify({ v: 1, tenant: "Not A Tenant", generation: 1 }));
      await a.publish(`${prefix}tenant-changes`, "acme 8");
      await publisher.announce("bravo", 2);
      await until(() => ours.heard.length === 2, "the second announcement");
      expect(ours.heard).toEqual([["acme", 7], ["bravo", 2]]);
      expect(lines.filter((l) => l["msg"] === "dropped a tenant change announcement that is none")).toHaveLength(2);
      expect(theirs.heard).toEqual([]);
    } finally {
      await stopOurs();
      await stopTheirs();
    }
    // Stopped: its connection is gone.
    const clients = await a.client("LIST");
    expect(String(clients)).not.toContain("generations-test-b-tenant-changes");
  });
});

describe("tenant change announcements when Redis drops", () => {
  let server: PrivateRedis;
  let a: Redis;
  let b: Redis;
  beforeAll(async () => {
    server = await startPrivateRedis();
    a = await connectRedis(server.url, { logger: quiet, name: "drop-test-a" });
    b = await connectRedis(server.url, { logger: quiet, name: "drop-test-b" });
  }, 30_000);
  afterAll(async () => {
    a?.disconnect();
    b?.disconnect();
    await server?.close();
  });

  it("a change whose announcement fails is made; the watcher is told it missed some once Redis is back, and hears the next", async () => {
    const { logger, lines } = recordingLogger();
    const publisher = createRedisTenantGenerations(a, { prefix: "chaoscore:", logger });
    const watcher = hearing();
    const stop = await createRedisTenantGenerations(b, { prefix: "chaoscore:", logger }).watch(watcher.listener);
    try {
      // The SET goes in, then Redis is gone before the commit's announcement: the change stands.
      const made = await announcedChange(publisher, "acme", async (publish) => {
        await publish(11);
        await server.kill();
        return "made";
      });
      expect(made).toBe("made");
      expect(lines.find((l) => String(l["msg"]).startsWith("a tenant change could not be announced"))).toMatchObject({ tenant: "acme", generation: 11 });
      expect(watcher.missed).toBe(0);

      await server.start();
      await until(() => watcher.missed === 1, "the watcher to be told it missed announcements");
      // The watcher's connection is back; the publisher's reconnects on its own schedule (no offline queue).
      await until(() => a.status === "ready", "the publisher to reconnect");
      expect(await publisher.get("acme")).toBe(11);
      await publisher.announce("acme", 12);
      await until(() => watcher.heard.length === 1, "the announcement after the reconnect");
      expect(watcher.heard).toEqual([["acme", 12]]);
    } finally {
      await stop();
    }
  }, 30_000);
});
