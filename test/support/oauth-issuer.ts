import { randomBytes, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from "jose";

/** One signing key of the test issuer. */
export interface IssuerKey {
  readonly kid: string;
  readonly alg: string;
  readonly privateKey: CryptoKey;
  readonly publicJwk: JWK;
}

/** How to sign one token: the defaults make a good one. */
export interface SignOptions {
  readonly key?: IssuerKey;
  /** The `kid` header; the key's own by default. */
  readonly kid?: string;
  readonly typ?: string;
  readonly issuer?: string;
  readonly audience?: string | string[];
  /** Seconds from now; 300 by default. */
  readonly expiresIn?: number;
  /** Seconds from now, when set. */
  readonly notBefore?: number;
}

/**
 * A real authorization server for tests, on node:http: RFC 8414 metadata, a JWKS it can rotate,
 * RFC 7662 introspection of the opaque tokens it issued, and a token endpoint granting
 * client_credentials to its one client (tenant `machines`). Keys are made with jose here.
 */
export interface TestIssuer {
  readonly issuer: string;
  readonly jwksUrl: string;
  readonly introspectionUrl: string;
  readonly client: { readonly id: string; readonly secret: string };
  /** The key published now. */
  current(): IssuerKey;
  /** Makes a key that is not published. */
  newKey(alg?: string): Promise<IssuerKey>;
  /** Publishes a new key in place of the old ones (a rotation); returns it. */
  rotate(): Promise<IssuerKey>;
  /** A signed access token for `audience` with these claims. */
  sign(claims: JWTPayload, options?: SignOptions): Promise<string>;
  /** An opaque token whose introspection answers `claims` (with `active: true` unless they say). */
  issueOpaque(claims: Record<string, unknown>): string;
  /** How many times the JWKS, the introspection and the token endpoint were asked. */
  readonly requests: { jwks: number; introspection: number; token: number };
  /** The form of each token request (client_credentials), in order. */
  readonly tokenRequests: ReadonlyArray<Record<string, string>>;
  close(): Promise<void>;
}

export async function makeKey(alg = "ES256"): Promise<IssuerKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const kid = randomUUID();
  return { kid, alg, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg, use: "sig" } };
}

async function body(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** Starts a test issuer on a free loopback port; tokens are for `audience` unless a token says otherwise. */
export async function startTestIssuer(audience: string): Promise<TestIssuer> {
  let published: IssuerKey[] = [await makeKey()];
  const opaque = new Map<string, Record<string, unknown>>();
  const client = { id: "chaos-core-edge", secret: randomBytes(16).toString("hex") };
  const requests = { jwks: 0, introspection: 0, token: 0 };
  const tokenRequests: Array<Record<string, string>> = [];
  /** The tenant the token endpoint's tokens name. */
  const clientTenant = "machines";
  let issuer = "";

  const server: Server = createServer((req, res) => {
    void (async () => {
      const json = (status: number, value: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(value));
      if (req.method === "GET" && req.url === "/.well-known/oauth-authorization-server") {
        return json(200, {
          issuer,
          jwks_uri: `${issuer}/jwks`,
          introspection_endpoint: `${issuer}/introspect`,
          token_endpoint: `${issuer}/token`,
          // Required by RFC 8414 beside the code response type; never used by these tests.
          authorization_endpoint: `${issuer}/authorize`,
          grant_types_supported: ["client_credentials"],
          token_endpoint_auth_methods_supported: ["client_secret_basic"],
          response_types_supported: ["code"],
        });
      }
      if (req.method === "POST" && req.url === "/token") {
        // client_credentials for the registered client: a token for the resource it asks for
        // (RFC 8707), with the scopes it asks for, as principal = its client id.
        requests.token++;
        const expected = `Basic ${Buffer.from(`${client.id}:${client.secret}`).toString("base64")}`;
        if (req.headers.authorization !== expected) return json(401, { error: "invalid_client" });
        const form = new URLSearchParams(await body(req));
        if (form.get("grant_type") !== "client_credentials") return json(400, { error: "unsupported_grant_type" });
        tokenRequests.push(Object.fromEntries(form));
        const resource = form.get("resource") ?? audience;
        const scope = form.get("scope") ?? "chaoscore:agent";
        const access = await sign({ sub: client.id, tenant: clientTenant, scope }, { audience: resource });
        return json(200, { access_token: access, token_type: "Bearer", expires_in: 300, scope });
      }
      if (req.method === "GET" && req.url === "/jwks") {
        requests.jwks++;
        return json(200, { keys: published.map((k) => k.publicJwk) });
      }
      if (req.method === "POST" && req.url === "/introspect") {
        requests.introspection++;
        const expected = `Basic ${Buffer.from(`${client.id}:${client.secret}`).toString("base64")}`;
        if (req.headers.authorization !== expected) return json(401, { error: "invalid_client" });
        const token = new URLSearchParams(await body(req)).get("token") ?? "";
        const claims = opaque.get(token);
        return json(200, claims ? { active: true, ...claims } : { active: false });
      }
      json(404, { error: "not_found" });
    })();
  });
  async function sign(claims: JWTPayload, options: SignOptions = {}): Promise<string> {
    const key = options.key ?? published[0]!;
    const now = Math.floor(Date.now() / 1000);
    const jwt = new SignJWT(claims)
      .setProtectedHeader({ alg: key.alg, kid: options.kid ?? key.kid, typ: options.typ ?? "at+jwt" })
      .setIssuer(options.issuer ?? issuer)
      .setAudience(options.audience ?? audience)
      .setIssuedAt(now)
      .setJti(randomUUID())
      .setExpirationTime(now + (options.expiresIn ?? 300));
    if (options.notBefore !== undefined) jwt.setNotBefore(now + options.notBefore);
    return jwt.sign(key.privateKey);
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    issuer,
    jwksUrl: `${issuer}/jwks`,
    introspectionUrl: `${issuer}/introspect`,
    client,
    requests,
    tokenRequests,
    current: () => published[0]!,
    newKey: (alg) => makeKey(alg),
    async rotate() {
      const next = await makeKey();
      published = [next];
      return next;
    },
    sign,
    issueOpaque(claims) {
      const token = randomBytes(24).toString("base64url");
      opaque.set(token, claims);
      return token;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
