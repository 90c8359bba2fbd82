/**
 * The chart passes DATABASE_URL and REDIS_URL through as given, so Postgres TLS is the URL's
 * `sslmode` and Redis TLS the `rediss://` scheme. These tests show kit's clients honour both: the
 * machine's Postgres (which offers no TLS) is refused under `sslmode=require` and `verify-full`
 * rather than used in plaintext, and a `rediss://` client opens with a TLS ClientHello where a
 * `redis://` one speaks RESP.
 */
import { once } from "node:events";
import { createServer, type AddressInfo, type Socket } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { createLogger } from "../logger.js";
import { createRedisClient } from "../redis.js";
import { createPostgresDb } from "./postgres.js";

const PG = process.env.TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const withSslmode = (mode: string) => `${PG}${PG.includes("?") ? "&" : "?"}sslmode=${mode}`;

describe("Postgres sslmode in DATABASE_URL", () => {
  it("connects without TLS under sslmode=disable, and refuses a server without TLS under require and verify-full", async () => {
    const plain = createPostgresDb({ connectionString: withSslmode("disable") });
    try {
      expect((await plain.adminTx((q) => q.query<{ one: number }>("select 1 as one"))).rows[0]?.one).toBe(1);
    } finally {
      await plain.close();
    }
    for (const mode of ["require", "verify-full"]) {
      const db = createPostgresDb({ connectionString: withSslmode(mode) });
      try {
        await expect(db.adminTx((q) => q.query("select 1")), mode).rejects.toThrow(/database is unavailable|does not support SSL/);
        // The cause says why: the client insisted on TLS.
        const err = (await db.adminTx((q) => q.query("select 1")).then(
          () => undefined,
          (e: unknown) => e,
        )) as (Error & { cause?: Error }) | undefined;
        expect(String(err?.cause?.message ?? err?.message)).toMatch(/does not support SSL/);
      } finally {
        await db.close();
      }
    }
  });
});

describe("Redis rediss:// in REDIS_URL", () => {
  const sockets: Socket[] = [];
  const server = createServer((s) => sockets.push(s));
  afterAll(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });

  /** The first bytes a client made from `scheme://127.0.0.1:<port>` sends. */
  async function firstBytes(scheme: "redis" | "rediss"): Promise<Buffer> {
    if (!server.listening) await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as AddressInfo).port;
    const arrived = once(server, "connection") as Promise<[Socket]>;
    const client = createRedisClient(`${scheme}://127.0.0.1:${port}`, { logger: createLogger("store-tls", "silent"), name: "store-tls" });
    client.connect().catch(() => undefined);
    // ioredis sends its first command (or the TLS handshake) as soon as the socket opens.
    client.ping().catch(() => undefined);
    const [socket] = await arrived;
    const [data] = (await once(socket, "data")) as [Buffer];
    client.disconnect();
    return data;
  }

  it("opens a rediss:// connection with a TLS handshake and a redis:// one in plaintext RESP", async () => {
    const tls = await firstBytes("rediss");
    // A TLS record of type handshake (22), version 3.x: a ClientHello.
    expect([tls[0], tls[1]]).toEqual([0x16, 0x03]);
    const plain = await firstBytes("redis");
    expect(String.fromCharCode(plain[0]!)).toBe("*");
  });
});
