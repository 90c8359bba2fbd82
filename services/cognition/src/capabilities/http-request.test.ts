import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import {
  ChaosError,
  createInProcessClient,
  createPgliteDb,
  type CallContext,
  type Db,
  type ServiceClient,
} from "@chaos-core/kit";
import { createPolicyHandlers, createSqlPolicyStore, migratePolicy } from "@chaos-core/policy";
import { Decision, PolicyService, Risk } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { expectChaosError } from "../test-support/expect-error.js";
import type { CapabilityContext } from "./capability.js";
import {
  createHttpRequestCapability,
  httpRequestCapability,
  type HttpRequestOptions,
} from "./http-request.js";
import type { HostLookup } from "./http-request-target.js";

type HttpRequest = typeof httpRequestCapability;
type Route = (req: IncomingMessage, res: ServerResponse) => void;

/** A real HTTP server on 127.0.0.1 that records every request it sees. */
interface LocalServer {
  readonly port: number;
  readonly seen: Array<{ method: string; path: string; host: string }>;
  route: Route;
  close(): Promise<void>;
}

async function startServer(): Promise<LocalServer> {
  const seen: LocalServer["seen"] = [];
  const state = { route: ((_req, res) => res.end("ok")) as Route };
  const server: Server = createServer((req, res) => {
    seen.push({ method: req.method ?? "", path: req.url ?? "", host: req.headers.host ?? "" });
    state.route(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    get route() {
      return state.route;
    },
    set route(r: Route) {
      state.route = r;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Test DNS: these names resolve to the local servers; anything else does not exist. */
function mapLookup(names: Record<string, string[]>): HostLookup {
  return async (hostname) => {
    const addresses = names[hostname];
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
    return addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
  };
}

const LOCAL_NAMES = { "api.test": ["127.0.0.1"], "docs.test": ["127.0.0.1"], "evil.test": ["127.0.0.1"] };

/** The capability as tests run it: names mapped to 127.0.0.1, and exactly 127.0.0.1 allowed. */
function localCapability(overrides: HttpRequestOptions = {}): HttpRequest {
  return createHttpRequestCapability({ lookup: mapLookup(LOCAL_NAMES), allowAddress: ["127.0.0.1"], ...overrides });
}

const call: CallContext = { tenant: "acme", principal: "agent@test" };

function unused<T>(what: string): T {
  return new Proxy({}, {
    get() {
      throw new Error(`http.request must not use ${what}`);
    },
  }) as T;
}

let db: Db;
let dataDir: string;
let policy: ServiceClient<typeof PolicyService>;
let api: LocalServer;
let docs: LocalServer;

function context(signal: AbortSignal = AbortSignal.timeout(30_000)): CapabilityContext {
  return { call, signal, policy, provider: unused("the AI provider"), memory: unused("memory") };
}

/**
 * What the executor does before a handler runs: validate the input against the schema, ask
 * policy with the capability's facts, and run the handler only on ALLOW.
 */
async function execute(cap: HttpRequest, raw: unknown, signal?: AbortSignal) {
  const parsed = cap.inputSchema.safeParse(raw);
  if (!parsed.success) {
    throw new ChaosError("invalid_argument", parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; "));
  }
  const facts = cap.facts?.(parsed.data) ?? {};
  const decision = await policy.evaluate(
    { capability: cap.name, risk: Risk.MEDIUM, facts: { httpHost: facts.httpHost ?? "" } },
    { ctx: call },
  );
  if (decision.decision !== Decision.ALLOW) throw new ChaosError("policy_denied", decision.reason);
  const output = await cap.handler(parsed.data, context(signal));
  return cap.outputSchema.parse(output);
}

async function putPolicy(document: {
  httpAllowedDomains: string[];
  requireConfirmationFor?: string[];
}): Promise<void> {
  await policy.putPolicy(
    {
      document: {
        requireConfirmationFor: document.requireConfirmationFor ?? [],
        httpAllowedDomains: document.httpAllowedDomains,
        riskRules: { requireApprovalAtOrAbove: Risk.HIGH },
      },
    },
    { ctx: call },
  );
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "chaoscore-http-request-policy-"));
  db = await createPgliteDb({ dataDir });
  await migratePolicy(db);
  policy = createInProcessClient(PolicyService, createPolicyHandlers(createSqlPolicyStore(db)));
});

afterAll(async () => {
  await db.close();
  await rm(dataDir, { recursive: true, force: true });
});

beforeEach(async () => {
  api = await startServer();
  docs = await startServer();
  // api.test and docs.test are allowlisted; evil.test resolves just as well but is not.
  await putPolicy({ httpAllowedDomains: ["api.test", "docs.test", "127.0.0.1"] });
});

afterEach(async () => {
  await api.close();
  await docs.close();
});

describe("http.request: the definition", () => {
  it("is a read-only, open-world GET of medium risk whose policy fact is the exact host", () => {
    const cap = httpRequestCapability;
    expect(cap.name).toBe("http.request");
    expect(cap.risk).toBe("medium");
    expect(cap.annotations).toEqual({ readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true });
    const facts = (url: string) => cap.facts?.(cap.inputSchema.parse({ url }));
    expect(facts("https://API.Example.com:8443/v1/items?q=1")).toEqual({ httpHost: "api.example.com" });
    expect(facts("http://sub.api.example.com/")).toEqual({ httpHost: "sub.api.example.com" });
  });

  it("refuses a non-GET method with a clear reason, and accepts an explicit GET", async () => {
    const err = await expectChaosError(execute(localCapability(), { url: `http://api.test:${api.port}/`, method: "POST" }), "invalid_argument");
    expect(err.message).toMatch(/GET only.*"POST" is refused/);
    const ok = await execute(localCapability(), { url: `http://api.test:${api.port}/`, method: "GET" });
    expect(ok.status).toBe(200);
    expect(api.seen.map((r) => r.method)).toEqual(["GET"]);
  });

  it("refuses bad input before anything is sent: other schemes, credentials, forbidden headers, oversized max_bytes", async () => {
    const cap = localCapability();
    const cases: Array<[unknown, RegExp]> = [
      [{ url: "ftp://api.test/file" }, /only http and https/],
      [{ url: "not a url" }, /not an absolute URL/],
      [{ url: `http://user:pw@api.test:${api.port}/` }, /credentials/],
      [{ url: `http://api.test:${api.port}/`, headers: { Authorization: "Bearer x" } }, /may not be set/],
      [{ url: `http://api.test:${api.port}/`, headers: { Host: "other.test" } }, /may not be set/],
      [{ url: `http://api.test:${api.port}/`, headers: { "x-a": "1\r\nx-b: 2" } }, /CR, LF/],
      [{ url: `http://api.test:${api.port}/`, max_bytes: 5 * 1024 * 1024 }, /max_bytes/],
      [{ url: `http://api.test:${api.port}/`, body: "x" }, /Unrecognized key/],
    ];
    for (const [input, message] of cases) {
      const err = await expectChaosError(execute(cap, input), "invalid_argument");
      expect(err.message).toMatch(message);
    }
    expect(api.seen).toEqual([]);
  });
});

describe("http.request against local servers", () => {
  it("fetches an allowlisted host: status, body, final URL, safe headers only", async () => {
    api.route = (req, res) => {
      res.setHeader("content-type", "application/json; charset=utf-8");
      res.setHeader("set-cookie", "session=secret-cookie");
      res.setHeader("x-internal", "yes");
      res.end(JSON.stringify({ path: req.url, ua: req.headers["user-agent"], accept: req.headers.accept }));
    };
    const out = await execute(localCapability(), { url: `http://api.test:${api.port}/v1/items?q=1`, headers: { Accept: "application/json" } });

    expect(out.status).toBe(200);
    expect(out.url).toBe(`http://api.test:${api.port}/v1/items?q=1`);
    expect(out.redirects).toEqual([]);
    expect(JSON.parse(out.body)).toEqual({ path: "/v1/items?q=1", ua: "chaos-core-http-request/0.1", accept: "application/json" });
    expect(out).toMatchObject({ truncated: false, bytes: Buffer.byteLength(out.body) });
    expect(out.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(out.headers).not.toHaveProperty("set-cookie");
    expect(out.headers).not.toHaveProperty("x-internal");
    // The Host header is the name, not the pinned address.
    expect(api.seen).toEqual([{ method: "GET", path: "/v1/items?q=1", host: `api.test:${api.port}` }]);
  });

  it("returns a non-2xx answer as a result (the status is the caller's to judge)", async () => {
    api.route = (_req, res) => {
      res.statusCode = 404;
      res.end("no such item");
    };
    const out = await execute(localCapability(), { url: `http://api.test:${api.port}/missing` });
    expect(out).toMatchObject({ status: 404, body: "no such item" });
  });

  it("refuses a host that is not allowlisted through policy, before any request", async () => {
    const err = await expectChaosError(execute(localCapability(), { url: `http://evil.test:${api.port}/` }), "policy_denied");
    expect(err.message).toContain('"evil.test" is not an allowed HTTP host');
    expect(api.seen).toEqual([]);
  });

  it.each([
    "http://127.0.0.1:PORT/",
    "http://2130706433:PORT/",
    "http://0x7f.0.0.1:PORT/",
    "http://0x7f000001:PORT/",
    "http://0177.0.0.1:PORT/",
    "http://127.1:PORT/",
    "http://[::1]:PORT/",
    "http://[::ffff:127.0.0.1]:PORT/",
    "http://[0:0:0:0:0:0:0:1]:PORT/",
  ])("refuses the IP literal %s in the handler, without connecting", async (template) => {
    const url = template.replace("PORT", String(api.port));
    // Straight to the handler, as if policy had said yes, and with 127.0.0.1 an allowed address:
    // the literal is refused on its own grounds.
    const cap = localCapability();
    const err = await expectChaosError(cap.handler(cap.inputSchema.parse({ url }), context()), "permission_denied");
    expect(err.message).toMatch(/is an IP address literal/);
    expect(api.seen).toEqual([]);
  });

  it("refuses an IP literal even when the operator allowlisted it in policy", async () => {
    // "127.0.0.1" is in httpAllowedDomains; decimal and hex spellings normalise to it, so policy allows them.
    for (const url of [`http://127.0.0.1:${api.port}/`, `http://2130706433:${api.port}/`, `http://0x7f.0.0.1:${api.port}/`]) {
      const err = await expectChaosError(execute(localCapability(), { url }), "permission_denied");
      expect(err.message).toContain('"127.0.0.1" is an IP address literal');
    }
    expect(api.seen).toEqual([]);
  });

  it("with the default rules, refuses a name that resolves to loopback or private addresses", async () => {
    const cases: Array<[string, RegExp]> = [
      ["127.0.0.1", /resolves to 127\.0\.0\.1 \(loopback\)/],
      ["10.0.0.7", /resolves to 10\.0\.0\.7 \(private\)/],
      ["169.254.169.254", /link-local/],
      ["::ffff:127.0.0.1", /loopback, embedded in IPv6/],
    ];
    for (const [address, reason] of cases) {
      const cap = createHttpRequestCapability({ lookup: mapLookup({ "api.test": [address] }) });
      const err = await expectChaosError(execute(cap, { url: `http://api.test:${api.port}/` }), "permission_denied");
      expect(err.message).toMatch(reason);
      expect(err.message).toContain('"api.test"');
    }
    expect(api.seen).toEqual([]);
  });

  it("allows exactly the addresses the operator allows: 127.0.0.1, not 127.0.0.2", async () => {
    const cap = createHttpRequestCapability({ lookup: mapLookup({ "api.test": ["127.0.0.2"] }), allowAddress: ["127.0.0.1"] });
    const err = await expectChaosError(execute(cap, { url: `http://api.test:${api.port}/` }), "permission_denied");
    expect(err.message).toContain("127.0.0.2 (loopback)");
    expect(api.seen).toEqual([]);
  });

  it("blocks DNS rebinding: one bad address among the answers refuses the host", async () => {
    const cap = createHttpRequestCapability({ lookup: mapLookup({ "api.test": ["93.184.216.34", "127.0.0.1"] }) });
    const err = await expectChaosError(execute(cap, { url: `http://api.test:${api.port}/` }), "permission_denied");
    expect(err.message).toContain("127.0.0.1 (loopback)");
    expect(api.seen).toEqual([]);
  });

  it("pins the connection to the vetted answer: the socket does not resolve the name again", async () => {
    let lookups = 0;
    const cap = localCapability({
      // The first answer is vetted; any later one would point somewhere unreachable.
      lookup: async () => (lookups++ === 0 ? [{ address: "127.0.0.1", family: 4 }] : [{ address: "192.0.2.1", family: 4 }]),
    });
    const out = await execute(cap, { url: `http://api.test:${api.port}/` });
    expect(out.status).toBe(200);
    expect(lookups).toBe(1);
    expect(api.seen).toHaveLength(1);
  });

  it("reports a name that does not resolve, and a refused connection, as unavailable", async () => {
    await putPolicy({ httpAllowedDomains: ["api.test", "nowhere.test"] });
    const unresolved = await expectChaosError(execute(localCapability(), { url: "http://nowhere.test/" }), "unavailable");
    expect(unresolved.message).toContain('could not resolve "nowhere.test" (ENOTFOUND)');

    const closedPort = api.port;
    await api.close();
    const refused = await expectChaosError(execute(localCapability(), { url: `http://api.test:${closedPort}/` }), "unavailable");
    expect(refused.message).toMatch(/api\.test.*ECONNREFUSED/);
    api = await startServer();
  });
});

describe("http.request redirects", () => {
  it("follows a redirect to an allowlisted host, asking policy about it", async () => {
    api.route = (_req, res) => {
      res.writeHead(302, { location: `http://docs.test:${docs.port}/guide` });
      res.end();
    };
    docs.route = (_req, res) => res.end("the guide");
    const out = await execute(localCapability(), { url: `http://api.test:${api.port}/start` });

    expect(out).toMatchObject({ status: 200, body: "the guide", url: `http://docs.test:${docs.port}/guide` });
    expect(out.redirects).toEqual([`http://docs.test:${docs.port}/guide`]);
    expect(docs.seen).toEqual([{ method: "GET", path: "/guide", host: `docs.test:${docs.port}` }]);
  });

  it("refuses a redirect to a host that is not allowlisted, naming it; that host sees no request", async () => {
    api.route = (_req, res) => {
      res.writeHead(301, { location: `http://evil.test:${docs.port}/steal` });
      res.end();
    };
    const err = await expectChaosError(execute(localCapability(), { url: `http://api.test:${api.port}/` }), "policy_denied");
    expect(err.message).toContain(`redirect 1 to http://evil.test:${docs.port}/steal`);
    expect(err.message).toContain('"evil.test" is not an allowed HTTP host');
    expect(api.seen).toHaveLength(1);
    expect(docs.seen).toEqual([]);
  });

  it("refuses a redirect to an IP literal or to an internal address", async () => {
    api.route = (_req, res) => {
      res.writeHead(302, { location: `http://[::1]:${docs.port}/` });
      res.end();
    };
    const literal = await expectChaosError(execute(localCapability(), { url: `http://api.test:${api.port}/` }), "permission_denied");
    expect(literal.message).toMatch(/redirect 1 .*"\[::1\]" is an IP address literal/);

    // docs.test is allowlisted by policy, but now resolves to a private address.
    api.route = (_req, res) => {
      res.writeHead(307, { location: `http://docs.test:${docs.port}/` });
      res.end();
    };
    const cap = localCapability({ lookup: mapLookup({ "api.test": ["127.0.0.1"], "docs.test": ["10.0.0.5"] }) });
    const internal = await expectChaosError(execute(cap, { url: `http://api.test:${api.port}/` }), "permission_denied");
    expect(internal.message).toContain(`redirect 1 to http://docs.test:${docs.port}/: "docs.test" resolves to 10.0.0.5 (private)`);
    expect(docs.seen).toEqual([]);
  });

  it("does not hand a redirect that needs approval the original call's approval", async () => {
    await putPolicy({ httpAllowedDomains: ["api.test", "docs.test"], requireConfirmationFor: ["http.request"] });
    api.route = (_req, res) => {
      res.writeHead(302, { location: `http://docs.test:${docs.port}/` });
      res.end();
    };
    // The first host was approved (the handler runs as after an approval); the redirect's host was not.
    const cap = localCapability();
    const err = await expectChaosError(
      cap.handler(cap.inputSchema.parse({ url: `http://api.test:${api.port}/` }), context()),
      "policy_denied",
    );
    expect(err.message).toMatch(/requires an approval for "docs\.test".*call http\.request with that URL directly/);
    expect(docs.seen).toEqual([]);
  });

  it("follows a same-host redirect without a new policy question, and stops a loop at the hop limit", async () => {
    api.route = (req, res) => {
      const n = Number(new URL(req.url ?? "/", "http://x").searchParams.get("n") ?? "0");
      res.writeHead(302, { location: `/loop?n=${n + 1}` });
      res.end();
    };
    const err = await expectChaosError(execute(localCapability(), { url: `http://api.test:${api.port}/loop` }), "resource_exhausted");
    expect(err.message).toMatch(/redirect 5 to .*\/loop\?n=5: answered 302 with another redirect; http\.request follows at most 5 redirects/);
    expect(api.seen).toHaveLength(6);
  });

  it("drops caller headers other than accept/accept-language/user-agent when a redirect leaves the origin", async () => {
    api.route = (_req, res) => {
      res.writeHead(302, { location: `http://docs.test:${docs.port}/` });
      res.end();
    };
    let received: IncomingMessage["headers"] = {};
    docs.route = (req, res) => {
      received = req.headers;
      res.end("ok");
    };
    await execute(localCapability(), {
      url: `http://api.test:${api.port}/`,
      headers: { "X-Api-Key": "k-123", "Accept-Language": "de" },
    });
    expect(received).not.toHaveProperty("x-api-key");
    expect(received["accept-language"]).toBe("de");
  });
});

describe("http.request limits", () => {
  it("cuts a body longer than max_bytes and flags it", async () => {
    api.route = (_req, res) => res.end("a".repeat(10_000));
    const out = await execute(localCapability(), { url: `http://api.test:${api.port}/`, max_bytes: 1000 });
    expect(out).toMatchObject({ status: 200, truncated: true, bytes: 1000 });
    expect(out.body).toBe("a".repeat(1000));

    const exact = await execute(localCapability(), { url: `http://api.test:${api.port}/`, max_bytes: 10_000 });
    expect(exact).toMatchObject({ truncated: false, bytes: 10_000 });
  });

  it("stops reading an endless body at max_bytes instead of downloading it", async () => {
    api.route = (_req, res) => {
      const chunk = Buffer.alloc(64 * 1024, "z");
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once("drain", pump);
      };
      pump();
    };
    const out = await execute(localCapability(), { url: `http://api.test:${api.port}/` });
    expect(out).toMatchObject({ truncated: true, bytes: 1024 * 1024 });
  });

  it("limits the decoded size of a compressed body, not the compressed one", async () => {
    api.route = (_req, res) => {
      res.writeHead(200, { "content-encoding": "gzip", "content-type": "text/plain" });
      res.end(gzipSync(Buffer.alloc(2 * 1024 * 1024, "b")));
    };
    const out = await execute(localCapability(), { url: `http://api.test:${api.port}/`, max_bytes: 5000 });
    expect(out).toMatchObject({ truncated: true, bytes: 5000, body: "b".repeat(5000) });
  });

  it("fails a server that never answers at the time limit, naming the request", async () => {
    api.route = () => undefined;
    const started = Date.now();
    const err = await expectChaosError(
      execute(localCapability({ timeoutMs: 300 }), { url: `http://api.test:${api.port}/slow` }),
      "deadline_exceeded",
    );
    expect(err.message).toContain(`GET http://api.test:${api.port}/slow: no complete answer within 300 ms`);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("fails a body that stalls half-way at the time limit", async () => {
    api.route = (_req, res) => {
      res.write("partial");
    };
    await expectChaosError(execute(localCapability({ timeoutMs: 300 }), { url: `http://api.test:${api.port}/` }), "deadline_exceeded");
  });

  it("stops when the caller cancels", async () => {
    api.route = () => undefined;
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    await expectChaosError(execute(localCapability(), { url: `http://api.test:${api.port}/` }, controller.signal), "cancelled");
  });

  it("refuses a deadline outside 1 ms to 60 s when it is built", () => {
    expect(() => createHttpRequestCapability({ timeoutMs: 0 })).toThrow(/timeoutMs/);
    expect(() => createHttpRequestCapability({ timeoutMs: 120_000 })).toThrow(/timeoutMs/);
  });
});
