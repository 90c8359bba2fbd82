import { once } from "node:events";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createLogger } from "@chaos-core/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { guardedUpstreamFetch } from "./guarded-fetch.js";
import { createUpstreamPool } from "./pool.js";

/** Who the calls are made for. */
const ACME = { tenant: "acme", principal: "agent" };

/** A server on 127.0.0.1 that answers by path, and remembers the headers it was sent. */
async function serve(answer: (path: string) => { status: number; location?: string; body?: string }): Promise<{ server: Server; port: number; seen: IncomingHttpHeaders[] }> {
  const seen: IncomingHttpHeaders[] = [];
  const server = createServer((req, res) => {
    seen.push(req.headers);
    const a = answer(req.url ?? "/");
    res.writeHead(a.status, { "content-type": "text/plain", ...(a.location ? { location: a.location } : {}) });
    res.end(a.body ?? "");
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { server, port: (server.address() as AddressInfo).port, seen };
}

// `other.test` is a second origin on the same machine, as a name only the test resolves.
const lookup = async (host: string) => (host === "other.test" ? [{ address: "127.0.0.1", family: 4 }] : [{ address: "93.184.215.14", family: 4 }]);

describe("guardedUpstreamFetch: a tenant's upstream is reached only at addresses http.request may reach", () => {
  let a: Awaited<ReturnType<typeof serve>>;
  let b: Awaited<ReturnType<typeof serve>>;
  beforeAll(async () => {
    b = await serve(() => ({ status: 200, body: "b" }));
    a = await serve((path) => {
      if (path === "/to-metadata") return { status: 302, location: "http://169.254.169.254/latest/meta-data/" };
      if (path === "/to-other") return { status: 307, location: `http://other.test:${b.port}/landed` };
      if (path === "/to-self") return { status: 308, location: "/mcp" };
      return { status: 200, body: "a" };
    });
  });
  afterAll(() => {
    a.server.close();
    b.server.close();
  });

  it("refuses a loopback upstream unless the operator allows its range", async () => {
    const denied = guardedUpstreamFetch({ who: 'upstream "wiki"', lookup });
    await expect(denied(`http://127.0.0.1:${a.port}/mcp`)).rejects.toThrow(/^upstream "wiki": http:\/\/127\.0\.0\.1:\d+\/mcp: 127\.0\.0\.1 is loopback;/);
    expect(a.seen).toHaveLength(0);
    const allowed = guardedUpstreamFetch({ who: 'upstream "wiki"', lookup, allowedAddresses: ["127.0.0.1/32"] });
    const res = await allowed(`http://127.0.0.1:${a.port}/mcp`, { method: "POST", body: "{}", headers: { authorization: "Bearer t" } });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("a");
  });

  it("checks every redirect: one to the metadata address is refused, naming the hop", async () => {
    const f = guardedUpstreamFetch({ who: 'upstream "wiki"', lookup, allowedAddresses: ["127.0.0.1"] });
    await expect(f(`http://127.0.0.1:${a.port}/to-metadata`)).rejects.toThrow(/redirect 1 to http:\/\/169\.254\.169\.254\/latest\/meta-data\/: 169\.254\.169\.254 is link-local/);
    // Where the SDK follows redirects itself, each hop comes back here as a request of its own.
    const manual = await f(`http://127.0.0.1:${a.port}/to-metadata`, { redirect: "manual" });
    expect(manual.status).toBe(302);
    await expect(f(manual.headers.get("location")!)).rejects.toThrow(/link-local/);
  });

  it("follows a redirect within the origin with its headers, and carries none of the declaration's headers to another origin", async () => {
    const f = guardedUpstreamFetch({ who: 'upstream "wiki"', lookup, allowedAddresses: ["127.0.0.1"] });
    const same = await f(`http://127.0.0.1:${a.port}/to-self`, { method: "POST", body: "{}", headers: { authorization: "Bearer secret-token", "content-type": "application/json" } });
    expect(await same.text()).toBe("a");
    expect(a.seen.at(-1)?.authorization).toBe("Bearer secret-token");
    const other = await f(`http://127.0.0.1:${a.port}/to-other`, { method: "POST", body: "{}", headers: { authorization: "Bearer secret-token", "x-api-key": "k", accept: "application/json" } });
    expect(await other.text()).toBe("b");
    expect(b.seen.at(-1)).toMatchObject({ accept: "application/json" });
    expect(b.seen.at(-1)?.authorization).toBeUndefined();
    expect(b.seen.at(-1)?.["x-api-key"]).toBeUndefined();
  });

  it("a pool whose connections use it cannot reach a loopback upstream: the call fails naming the address", async () => {
    const pool = createUpstreamPool({
      connect: { secrets: { env: {} }, workDir: "/nonexistent", version: "test", fetch: guardedUpstreamFetch({ who: 'upstream "wiki" of tenant "acme"', lookup }) },
      logger: createLogger("test", "silent"),
    });
    const decl = { name: "wiki", transport: "http" as const, url: `http://127.0.0.1:${a.port}/mcp`, headers: {}, timeoutMs: 2_000, trustAnnotations: true, disabled: false };
    const before = a.seen.length;
    await expect(pool.call(decl, ACME, "echo", {})).rejects.toThrow(/upstream "wiki".*127\.0\.0\.1 is loopback/s);
    expect(a.seen).toHaveLength(before);
    await pool.close();
  });
});
