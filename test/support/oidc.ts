/**
 * A real authorization server nobody here wrote — `oidc-provider` from npm — on loopback, and
 * Streamable HTTP MCP servers (the official SDK) that check the tokens it issues: what the tests of
 * cognition's upstream OAuth (docs/federation-platform.md §3) run against.
 *
 * oidc-provider has client credentials and resource indicators (RFC 8707) built in. It has no
 * RFC 8693 token exchange: {@link startOidcProvider} registers one through its own
 * `registerGrantType`, written here, as a deployment of it would. The grant takes a subject token
 * the provider issued — an opaque one it still holds (`AccessToken.find`), or a JWT access token
 * it signed (checked against its own keys) — refuses one whose grant was revoked (`Grant.find`),
 * and issues a JWT access token of the same account for the one resource named, with the acting
 * client in `act` (RFC 8693 §4.1).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createRemoteJWKSet, jwtVerify } from "jose";
import Provider, { errors, type KoaContextWithOIDC } from "oidc-provider";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";

export const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
export const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";

/** An OAuth error whose description says why (oidc-provider's own descriptions are generic). */
const refused = <E extends Error & { error_description?: string }>(err: E, why: string): E => Object.assign(err, { error_description: why });

const listen = (server: Server) => new Promise<number>((done) => server.listen(0, "127.0.0.1", () => done((server.address() as AddressInfo).port)));

export interface OidcServer {
  readonly issuer: string;
  readonly provider: Provider;
  /** Requests to the token endpoint so far. */
  tokenRequests(): number;
  /** How long the next tokens it issues live (seconds). */
  setTokenTtl(seconds: number): void;
  /**
   * Signs `account` in through the client the people use (`agent-app`), as a finished
   * authorization would: a grant and an access token of it — opaque, or with `forResource` a JWT
   * for that resource (RFC 9068, as Chaos Core's edge takes them) naming `tenant` in `org_id` and
   * holding the `chaoscore:agent` scope. Returns the token and the grant's id.
   */
  signIn(account: string, forResource?: { resource: string; tenant: string }): Promise<{ token: string; grantId: string }>;
  /** Revokes a grant, as oidc-provider does when a person withdraws it: tokens exchanged from its access tokens are refused from now on. */
  revokeGrant(grantId: string): Promise<void>;
  close(): Promise<void>;
}

/** oidc-provider with `chaos-core` as a confidential client of client credentials and token exchange (`secret`). */
export async function startOidcProvider(secret: string): Promise<OidcServer> {
  const server = createServer();
  const issuer = `http://127.0.0.1:${await listen(server)}`;
  let tokenTtl = 300;
  let requests = 0;
  /** The tenant of each account signed in for a resource: its tokens' `org_id`. */
  const tenants = new Map<string, string>();
  const resourceServer = (resource: string) => ({ scope: "", audience: resource, accessTokenTTL: tokenTtl, accessTokenFormat: "jwt" as const });
  const provider = new Provider(issuer, {
    clients: [
      { client_id: "chaos-core", client_secret: secret, grant_types: ["client_credentials", TOKEN_EXCHANGE], redirect_uris: [], response_types: [] },
      { client_id: "agent-app", token_endpoint_auth_method: "none", grant_types: ["authorization_code"], redirect_uris: ["http://127.0.0.1/callback"], response_types: ["code"] },
    ],
    // An exchanged token names the client acting for the person (RFC 8693 §4.1).
    // A signed-in person's JWT names their tenant and the grant it belongs to (what the exchange checks is still in force).
    extraTokenClaims: (_ctx, token) => {
      if (!("gty" in token)) return undefined;
      if (token.gty === "token_exchange") return { act: { sub: token.clientId } };
      const tenant = "accountId" in token ? tenants.get(token.accountId) : undefined;
      return tenant ? { org_id: tenant, grant: token.grantId } : undefined;
    },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      // Any resource a client names: the audience is the upstream's URL, the token a JWT it can verify.
      resourceIndicators: { enabled: true, getResourceServerInfo: (_ctx, resource) => resourceServer(resource) },
    },
  });
  const jwks = createRemoteJWKSet(new URL(`${issuer}/jwks`));
  /** The account and grant of a subject token this provider issued and that is still good. */
  const subjectOf = async (value: string): Promise<{ accountId: string; grantId?: string | undefined } | undefined> => {
    if (value.split(".").length === 3) {
      const claims = await jwtVerify(value, jwks, { issuer }).then(
        (v) => v.payload,
        () => undefined,
      );
      return typeof claims?.sub === "string" && typeof claims["grant"] === "string" ? { accountId: claims.sub, grantId: claims["grant"] } : undefined;
    }
    const held = await provider.AccessToken.find(value);
    return held && !held.isExpired ? { accountId: held.accountId, grantId: held.grantId } : undefined;
  };
  provider.registerGrantType(
    TOKEN_EXCHANGE,
    async (ctx: KoaContextWithOIDC) => {
      const params = ctx.oidc.params as Record<string, string | undefined>;
      if (params["subject_token_type"] !== ACCESS_TOKEN_TYPE) throw refused(new errors.InvalidRequest("subject_token_type"), `subject_token_type must be ${ACCESS_TOKEN_TYPE}`);
      const subject = await subjectOf(params["subject_token"] ?? "");
      if (!subject) throw refused(new errors.InvalidGrant(), "the subject token is not active");
      if (!subject.grantId || !(await provider.Grant.find(subject.grantId))) throw refused(new errors.InvalidGrant(), "the subject's grant was revoked");
      const resource = params["resource"];
      if (typeof resource !== "string") throw refused(new errors.InvalidTarget(), "name the one resource the token is for");
      const client = ctx.oidc.client!;
      const token = new provider.AccessToken({
        accountId: subject.accountId,
        client,
        grantId: subject.grantId,
        resourceServer: new provider.ResourceServer(resource, resourceServer(resource)),
        gty: "token_exchange",
      });
      ctx.body = { access_token: await token.save(), issued_token_type: ACCESS_TOKEN_TYPE, token_type: "Bearer", expires_in: token.expiration };
    },
    ["subject_token", "subject_token_type", "requested_token_type", "resource", "audience", "scope"],
  );
  server.on("request", (req, res) => {
    if (req.url?.startsWith("/token")) requests++;
    provider.callback()(req, res);
  });
  return {
    issuer,
    provider,
    tokenRequests: () => requests,
    setTokenTtl: (seconds) => void (tokenTtl = seconds),
    async signIn(account, forResource) {
      const client = (await provider.Client.find("agent-app"))!;
      const grant = new provider.Grant({ accountId: account, clientId: client.clientId });
      grant.addOIDCScope("openid");
      const grantId = await grant.save();
      if (!forResource) return { token: await new provider.AccessToken({ accountId: account, client, grantId, gty: "authorization_code", scope: "openid" }).save(), grantId };
      tenants.set(account, forResource.tenant);
      const { resource } = forResource;
      const token = new provider.AccessToken({ accountId: account, client, grantId, gty: "authorization_code", scope: "chaoscore:agent" });
      token.resourceServer = new provider.ResourceServer(resource, { ...resourceServer(resource), scope: "chaoscore:agent" });
      return { token: await token.save(), grantId };
    },
    async revokeGrant(grantId) {
      await (await provider.Grant.find(grantId))?.destroy();
    },
    close: () => new Promise((done) => server.close(() => done())),
  };
}

export interface AudienceServers {
  /**
   * A new Streamable HTTP MCP server checking tokens of `issuer` for its own URL (or `resource`);
   * its URL. It publishes its Protected Resource Metadata (RFC 9728) naming that resource and the
   * issuer (or `authorizationServers`), unless `metadata` is false.
   */
  start(options?: { resource?: (url: string) => string; authorizationServers?: string[]; metadata?: boolean }): Promise<string>;
  /** How many MCP connections were opened to them (`notifications/initialized` heard). */
  connections(): number;
  close(): Promise<void>;
}

/**
 * MCP servers whose `whoami` answers the verified token's claims (`sub`, `client_id`, `act`,
 * `aud`); a request without a token of the issuer for this server's resource is answered 401 with
 * the reason, as an OAuth resource server does.
 */
export function audienceServers(issuer: string): AudienceServers {
  const servers: Server[] = [];
  let initialized = 0;
  const jwks = createRemoteJWKSet(new URL(`${issuer}/jwks`));
  return {
    async start(options = {}) {
      let resource = "";
      const server = createServer(async (req, res) => {
        if (req.url?.startsWith("/.well-known/oauth-protected-resource")) {
          if (options.metadata === false) return void res.writeHead(404).end();
          res.writeHead(200, { "content-type": "application/json" });
          return void res.end(JSON.stringify({ resource, authorization_servers: options.authorizationServers ?? [issuer] }));
        }
        const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
        let claims: Record<string, unknown>;
        try {
          if (!token) throw new Error("no bearer token");
          claims = (await jwtVerify(token, jwks, { issuer, audience: resource })).payload;
        } catch (err) {
          res.writeHead(401, { "www-authenticate": `Bearer error="invalid_token", error_description="${(err as Error).message.replace(/"/g, "'")}"` }).end();
          return;
        }
        const mcp = new McpServer({ name: "audience-server", version: "1.0.0" });
        mcp.registerTool("whoami", { description: "Answers who the token says is calling, and for which audience.", annotations: { readOnlyHint: true } }, () => ({
          content: [{ type: "text", text: JSON.stringify({ sub: claims.sub, client_id: claims.client_id, act: claims.act, aud: claims.aud }) }],
        }));
        mcp.server.oninitialized = () => void initialized++;
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
        res.on("close", () => void transport.close().then(() => mcp.close()));
        await mcp.connect(transport);
        await transport.handleRequest(req, res);
      });
      servers.push(server);
      const url = `http://127.0.0.1:${await listen(server)}/mcp`;
      resource = options.resource?.(url) ?? url;
      return url;
    },
    connections: () => initialized,
    async close() {
      for (const s of servers) await new Promise((done) => s.close(done));
    },
  };
}
