import { randomBytes } from "node:crypto";
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashApiKey } from "../auth/api-keys.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import { html } from "../console/html.js";
import { startHttpTransport, type RunningHttpTransport } from "./http.js";

let services: TestServices;

beforeAll(async () => {
  services = await startTestServices("home_page");
});

afterAll(async () => {
  await services?.close();
});

/** A GET through node:http, which sends the Host header it is given (fetch would replace it). */
function get(url: string, host?: string): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: host ? { host } : {} }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("GET / on the HTTP edge", () => {
  let edge: RunningHttpTransport;
  let base: string;

  beforeAll(async () => {
    edge = await startHttpTransport(services.deps(), { host: "127.0.0.1", port: 0 });
    base = edge.url.replace(/\/mcp$/, "");
  });

  afterAll(async () => {
    await edge?.close();
  });

  it("answers a page naming the MCP endpoint, the health endpoints and how to connect a client", async () => {
    const res = await get(`${base}/`);
    expect(res.status).toBe(200);
    expect(res.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(res.headers["content-security-policy"]).toBe("default-src 'self'");
    expect(res.body).toContain(`<code>${edge.url}</code>`);
    expect(res.body).toContain(`claude mcp add --transport http chaos-core ${edge.url}`);
    expect(res.body).toContain("npx @modelcontextprotocol/inspector");
    expect(res.body).toContain('<a href="/healthz">/healthz</a>');
    expect(res.body).toContain('<a href="/readyz">/readyz</a>');
    expect(res.body).toContain("No API key needed");
    expect(res.body).not.toMatch(/<script|style=/);
  });

  it("names the endpoint by the Host the browser used, and refuses a foreign Host as /mcp does", async () => {
    const port = new URL(base).port;
    const local = await get(`${base}/`, `localhost:${port}`);
    expect(local.status).toBe(200);
    expect(local.body).toContain(`<code>http://localhost:${port}/mcp</code>`);

    const foreign = await get(`${base}/`, "rebound.example.com");
    expect(foreign.status).toBe(403);
    expect(foreign.body).not.toContain("claude mcp add");
  });
});

describe("GET / when /mcp needs API keys", () => {
  it("says a key is needed and how to send it, and needs none itself", async () => {
    const key = randomBytes(24).toString("base64url");
    const edge = await startHttpTransport(services.deps(), {
      host: "127.0.0.1",
      port: 0,
      apiKeys: [{ tenant: "acme", principal: "alice", sha256: hashApiKey(key) }],
    });
    try {
      const res = await get(edge.url.replace(/\/mcp$/, "/"));
      expect(res.status).toBe(200);
      expect(res.body).toContain(`claude mcp add --transport http chaos-core ${edge.url} --header &quot;Authorization: Bearer YOUR_API_KEY&quot;`);
      expect(res.body).not.toContain(key);
    } finally {
      await edge.close();
    }
  });
});

describe("the page with OAuth", () => {
  it("says a token is needed, names the issuer and links the metadata, and asks for no API key", async () => {
    const edge = await startHttpTransport(services.deps(), {
      host: "127.0.0.1",
      port: 0,
      oauth: { issuer: "https://auth.example.com", resource: "https://mcp.example.com/mcp" },
    });
    try {
      const res = await get(edge.url.replace(/\/mcp$/, "/"));
      expect(res.body).toContain("Every request needs an OAuth 2.1 access token.");
      expect(res.body).toContain("<code>https://auth.example.com</code>");
      expect(res.body).toContain('<a href="/.well-known/oauth-protected-resource">');
      expect(res.body).not.toContain("YOUR_API_KEY");
    } finally {
      await edge.close();
    }
  });
});

describe("html", () => {
  it("escapes every interpolated value, and only markup it made passes as is", () => {
    const hostile = `"><script>alert('x')</script>&`;
    const inner = html`<b>${hostile}</b>`;
    expect(html`<p title="${hostile}">${inner}${[inner, inner]}</p>`.text).toBe(
      `<p title="&quot;&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;">` +
        `<b>&quot;&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;</b>`.repeat(3) +
        "</p>",
    );
  });
});
