import { createHash, randomBytes, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
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

/** The cookie by which the test issuer knows who is signed in there (a person's session at the issuer). */
export const ISSUER_USER_COOKIE = "test-issuer-user";

/**
 * A person the test issuer's authorization endpoint signs in without asking (it auto-approves),
 * and what their tokens say. The knobs after `claims` make a misbehaving issuer for refusal tests.
 */
export interface IssuerUser {
  /** The access token's claims: `sub`, the tenant claim, `scope`. */
  readonly claims: JWTPayload;
  /** The access token's audience; by default the resource the client asked for (RFC 8707). */
  readonly audience?: string;
  /** Seconds the access token lives; 300 by default. */
  readonly expiresIn?: number;
  /** The ID token's `nonce`; by default the one the authorization request sent. */
  readonly idTokenNonce?: string;
  /** The ID token's `sub`; by default the access token's. */
  readonly idTokenSubject?: string;
  /** Answers the authorization request with this error (e.g. `access_denied`) instead of a code. */
  readonly deny?: string;
  /** The `iss` of the authorization response (RFC 9207); the issuer by default (another: a mix-up). */
  readonly responseIss?: string;
  /** The `state` of the authorization response; the request's by default (another: a forged answer). */
  readonly responseState?: string;
}

/** Options of {@link startTestIssuer}. */
export interface TestIssuerOptions {
  /** OpenID Connect too: `openid` in `scopes_supported`, and an ID token when it is asked for. */
  readonly openid?: boolean;
}

/**
 * A real authorization server for tests, on node:http: RFC 8414 metadata, a JWKS it can rotate,
 * RFC 7662 introspection of the opaque tokens it issued, a token endpoint granting
 * client_credentials to its one client (tenant `machines`), and the authorization code grant
 * with PKCE (S256 only, required) for its web client: an authorization endpoint that signs in
 * the user its cookie names without asking, codes that are single use and bound to the client,
 * the redirect URI and the code challenge, RFC 9207's `iss` in the response, and with `openid`
 * an ID token carrying the request's nonce. Keys are made with jose here.
 */
export interface TestIssuer {
  readonly issuer: string;
  readonly jwksUrl: string;
  readonly introspectionUrl: string;
  readonly client: { readonly id: string; readonly secret: string };
  /** The confidential client of the authorization code grant (the approval console's). */
  readonly webClient: { readonly id: string; readonly secret: string };
  /** Registers a redirect URI of the web client (exact match; others are refused without a redirect). */
  registerRedirectUri(uri: string): void;
  /** Adds a person, signed in when a browser's {@link ISSUER_USER_COOKIE} names `name`. */
  addUser(name: string, user: IssuerUser): void;
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
  /** The query of each authorization request, in order. */
  readonly authorizationRequests: ReadonlyArray<Record<string, string>>;
  /** The form of each authorization_code token request (its secret-free part), and what was answered. */
  readonly codeRequests: ReadonlyArray<{ readonly form: Record<string, string>; readonly status: number; readonly error?: string }>;
  /** Every access token the authorization code grant issued (to check none is shown or kept). */
  readonly codeAccessTokens: readonly string[];
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

/** RFC 7636's S256: BASE64URL(SHA256(code_verifier)). */
const s256 = (verifier: string) => createHash("sha256").update(verifier, "ascii").digest("base64url");

/** A code the authorization endpoint issued, and what it was issued for. */
interface IssuedCode {
  readonly user: IssuerUser;
  readonly clientId: string;
  readonly redirectUri: string;
  readonly challenge: string;
  readonly scope: string;
  readonly resource?: string;
  readonly nonce?: string;
  readonly expires: number;
}

/** Starts a test issuer on a free loopback port; tokens are for `audience` unless a token says otherwise. */
export async function startTestIssuer(audience: string, options: TestIssuerOptions = {}): Promise<TestIssuer> {
  let published: IssuerKey[] = [await makeKey()];
  const opaque = new Map<string, Record<string, unknown>>();
  const client = { id: "chaos-core-edge", secret: randomBytes(16).toString("hex") };
  const webClient = { id: "chaos-core-console", secret: randomBytes(16).toString("hex") };
  const redirectUris = new Set<string>();
  const users = new Map<string, IssuerUser>();
  const codes = new Map<string, IssuedCode>();
  const requests = { jwks: 0, introspection: 0, token: 0 };
  const tokenRequests: Array<Record<string, string>> = [];
  const authorizationRequests: Array<Record<string, string>> = [];
  const codeRequests: Array<{ form: Record<string, string>; status: number; error?: string }> = [];
  const codeAccessTokens: string[] = [];
  /**
   * Whether an Authorization header is client `c`'s HTTP Basic credentials. RFC 6749 §2.3.1 has
   * the client form-encode its id and secret before Base64 (oauth4webapi does, `-` becoming
   * `%2D`), so they are decoded before the comparison, as an authorization server does.
   */
  const isBasic = (header: string | undefined, c: { id: string; secret: string }): boolean => {
    const m = /^Basic ([A-Za-z0-9+/=]+)$/.exec(header ?? "");
    if (!m) return false;
    const pair = Buffer.from(m[1]!, "base64").toString("utf8");
    const colon = pair.indexOf(":");
    const decode = (v: string) => decodeURIComponent(v.replace(/\+/g, " "));
    try {
      return colon > 0 && decode(pair.slice(0, colon)) === c.id && decode(pair.slice(colon + 1)) === c.secret;
    } catch {
      return false;
    }
  };
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
          authorization_endpoint: `${issuer}/authorize`,
          grant_types_supported: ["client_credentials", "authorization_code"],
          token_endpoint_auth_methods_supported: ["client_secret_basic"],
          response_types_supported: ["code"],
          code_challenge_methods_supported: ["S256"],
          authorization_response_iss_parameter_supported: true,
          scopes_supported: [...(options.openid ? ["openid"] : []), "chaoscore:agent", "chaoscore:approver"],
          ...(options.openid ? { id_token_signing_alg_values_supported: ["ES256"], subject_types_supported: ["public"] } : {}),
        });
      }
      if (req.method === "GET" && req.url?.startsWith("/authorize?")) return authorize(req, res);
      if (req.method === "POST" && req.url === "/token") {
        requests.token++;
        const text = await body(req);
        const form = new URLSearchParams(text);
        if (form.get("grant_type") === "authorization_code") {
          const answer = await exchangeCode(req.headers.authorization, form);
          // The verifier is recorded as whether it came, as the tests ask it.
          const { code_verifier: verifier, ...rest } = Object.fromEntries(form);
          const shown = { ...rest, code_verifier: verifier === undefined ? "(none)" : "(sent)" };
          codeRequests.push({ form: shown, status: answer.status, ...(typeof answer.body["error"] === "string" ? { error: answer.body["error"] } : {}) });
          return json(answer.status, answer.body);
        }
        // client_credentials for the registered client: a token for the resource it asks for
        // (RFC 8707), with the scopes it asks for, as principal = its client id.
        if (!isBasic(req.headers.authorization, client)) return json(401, { error: "invalid_client" });
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
        if (!isBasic(req.headers.authorization, client)) return json(401, { error: "invalid_client" });
        const token = new URLSearchParams(await body(req)).get("token") ?? "";
        const claims = opaque.get(token);
        return json(200, claims ? { active: true, ...claims } : { active: false });
      }
      json(404, { error: "not_found" });
    })();
  });

  /**
   * The authorization endpoint: the web client and a registered redirect URI, or a plain 400
   * (never a redirect to an unregistered URI); the user the cookie names, signed in without a
   * prompt; PKCE S256 required; then a single-use code, 60 s, back to the redirect URI with the
   * state and RFC 9207's `iss`.
   */
  function authorize(req: IncomingMessage, res: ServerResponse): void {
    const q = new URL(req.url ?? "/", issuer).searchParams;
    authorizationRequests.push(Object.fromEntries(q));
    const page = (status: number, text: string): void => void res.writeHead(status, { "content-type": "text/plain; charset=utf-8" }).end(text);
    const redirectUri = q.get("redirect_uri") ?? "";
    if (q.get("client_id") !== webClient.id) return page(400, "unknown client_id");
    if (!redirectUris.has(redirectUri)) return page(400, `redirect_uri ${redirectUri} is not registered`);
    const cookie = /(?:^|;\s*)test-issuer-user=([^;]+)/.exec(req.headers.cookie ?? "")?.[1];
    const user = cookie ? users.get(cookie) : undefined;
    if (!user) return page(401, "nobody is signed in at the test issuer");
    const back = (params: Record<string, string | undefined>) => {
      const to = new URL(redirectUri);
      for (const [k, v] of Object.entries({ ...params, state: user.responseState ?? q.get("state") ?? undefined, iss: user.responseIss ?? issuer })) if (v !== undefined) to.searchParams.set(k, v);
      res.writeHead(302, { location: to.href }).end();
    };
    if (q.get("response_type") !== "code") return back({ error: "unsupported_response_type" });
    const challenge = q.get("code_challenge");
    if (!challenge || q.get("code_challenge_method") !== "S256") return back({ error: "invalid_request", error_description: "PKCE with S256 is required" });
    if (user.deny) return back({ error: user.deny, error_description: "the user declined" });
    const code = randomBytes(24).toString("base64url");
    const resource = q.get("resource");
    const nonce = q.get("nonce");
    codes.set(code, {
      user,
      clientId: webClient.id,
      redirectUri,
      challenge,
      scope: q.get("scope") ?? "",
      ...(resource ? { resource } : {}),
      ...(nonce ? { nonce } : {}),
      expires: Date.now() + 60_000,
    });
    back({ code });
  }

  /** The token endpoint's authorization_code grant: client, code (once), redirect URI, PKCE, then the tokens. */
  async function exchangeCode(authorization: string | undefined, form: URLSearchParams): Promise<{ status: number; body: Record<string, unknown> }> {
    if (!isBasic(authorization, webClient)) return { status: 401, body: { error: "invalid_client" } };
    const code = form.get("code") ?? "";
    const issued = codes.get(code);
    // Single use: a code is gone once presented, whatever the outcome.
    codes.delete(code);
    if (!issued || issued.expires < Date.now() || issued.clientId !== webClient.id) return { status: 400, body: { error: "invalid_grant", error_description: "unknown, used or expired code" } };
    if (form.get("redirect_uri") !== issued.redirectUri) return { status: 400, body: { error: "invalid_grant", error_description: "redirect_uri does not match" } };
    const verifier = form.get("code_verifier");
    if (!verifier) return { status: 400, body: { error: "invalid_grant", error_description: "code_verifier is required (PKCE)" } };
    if (s256(verifier) !== issued.challenge) return { status: 400, body: { error: "invalid_grant", error_description: "PKCE verification failed" } };
    const resource = form.get("resource") ?? issued.resource;
    if (issued.resource && resource !== issued.resource) return { status: 400, body: { error: "invalid_target", error_description: "resource differs from the authorization request's" } };
    const { user } = issued;
    const expiresIn = user.expiresIn ?? 300;
    const access = await sign(user.claims, { audience: user.audience ?? resource ?? audience, expiresIn });
    codeAccessTokens.push(access);
    let idToken: string | undefined;
    if (options.openid && issued.scope.split(" ").includes("openid")) {
      const key = published[0]!;
      const nonce = user.idTokenNonce ?? issued.nonce;
      idToken = await new SignJWT({ ...(nonce ? { nonce } : {}) })
        .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: "JWT" })
        .setIssuer(issuer)
        .setSubject(user.idTokenSubject ?? String(user.claims.sub))
        .setAudience(webClient.id)
        .setIssuedAt()
        .setExpirationTime("5m")
        .sign(key.privateKey);
    }
    const scope = typeof user.claims["scope"] === "string" ? user.claims["scope"] : undefined;
    return { status: 200, body: { access_token: access, token_type: "Bearer", expires_in: expiresIn, ...(scope ? { scope } : {}), ...(idToken ? { id_token: idToken } : {}) } };
  }
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
    webClient,
    registerRedirectUri: (uri) => void redirectUris.add(uri),
    addUser: (name, user) => void users.set(name, user),
    requests,
    tokenRequests,
    authorizationRequests,
    codeRequests,
    codeAccessTokens,
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
