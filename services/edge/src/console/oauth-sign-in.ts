import { createHmac } from "node:crypto";
import { EncryptJWT, jwtDecrypt } from "jose";
import * as oauth from "oauth4webapi";
import { fetchAuthorizationServerMetadata, type Logger } from "@chaos-core/kit";
import { BearerRefusal } from "../auth/bearer-refusal.js";
import type { Identity } from "../auth/identity.js";
import { readSecretFile, type OAuthVerifier, type VerifiedToken } from "../auth/oauth.js";
import { APPROVER_SCOPE } from "../auth/scopes.js";
import { sameToken } from "./csrf.js";

/**
 * Signing people in to the approval console through the edge's OAuth issuer (docs/auth.md, "The
 * approval console"): the authorization code flow of OAuth 2.1 with PKCE (S256), `state`, and a
 * `nonce` when the issuer speaks OpenID Connect, as a confidential client. The protocol is
 * oauth4webapi's (metadata validation, the authorization response, the token request and
 * response, the ID token's claims); the access token it yields is checked by the resource
 * server's own verifier, so a token the console accepts is one `/mcp` would accept, scopes
 * aside. Nothing here keeps the token: the caller gets the identity and the token's expiry.
 */

/** How long a started sign-in may take to come back (the flow cookie's lifetime). */
export const OAUTH_FLOW_SECONDS = 10 * 60;

/** How long the issuer's metadata is reused before it is read again. */
const METADATA_TTL_MS = 60 * 60 * 1000;

/** How long one request to the issuer may take. */
const FETCH_TIMEOUT_MS = 5_000;

/** The console's client at the issuer: id and secret (the secret itself, or a file holding it). */
export interface ConsoleOAuthClient {
  /** `CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID`. */
  readonly clientId: string;
  /** The secret itself (tests, embedding), or… */
  readonly clientSecret?: string;
  /** …`CHAOS_CORE_CONSOLE_OAUTH_CLIENT_SECRET_FILE`, read at start. */
  readonly clientSecretFile?: string;
}

/** What {@link createConsoleOAuthSignIn} is built from. */
export interface ConsoleOAuthSignInOptions {
  /** `CHAOS_CORE_OAUTH_ISSUER`, exactly as tokens' `iss` must spell it. */
  readonly issuer: string;
  /** `CHAOS_CORE_OAUTH_RESOURCE`: asked for (RFC 8707) and required as the token's audience. */
  readonly resource: string;
  readonly client: ConsoleOAuthClient;
  /** The resource server's verifier (the one `/mcp` uses). */
  readonly verifier: OAuthVerifier;
  /** Seals the flow cookie: derived from the console's signing key, so every replica opens every replica's. */
  readonly signingKey: Uint8Array;
  readonly logger: Logger;
}

/** A sign-in started: where to send the browser, and the sealed flow to keep in its cookie. */
export interface StartedSignIn {
  readonly authorizationUrl: string;
  /** The flow cookie's value: state, PKCE verifier, nonce, redirect URI and `next`, encrypted and expiring. */
  readonly flow: string;
}

/** A sign-in completed: whom the verified access token names, until when, and where to go on. */
export interface CompletedSignIn {
  readonly identity: Identity;
  readonly scopes: readonly string[];
  /** The token's `exp` in milliseconds since the epoch, when it has one. */
  readonly expiresAt?: number;
  /** The approval page the person was on the way to (already checked when the flow started). */
  readonly next?: string;
}

/**
 * Why a sign-in did not complete, as the page says it: an HTTP status, a title, a message for the
 * person; `counted` when it counts as a failed sign-in of the address (the issuer was asked, or
 * its token refused), as a bad API key does.
 */
export class SignInRefused extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    message: string,
    readonly counted: boolean,
  ) {
    super(message);
    this.name = "SignInRefused";
  }
}

/** Signs people in to the console through the issuer. */
export interface ConsoleOAuthSignIn {
  /** The issuer, as the sign-in page names it. */
  readonly issuer: string;
  /** Starts a sign-in that comes back to `redirectUri` (the console's callback as this browser reaches it). */
  start(redirectUri: string, next?: string): Promise<StartedSignIn>;
  /**
   * Completes the sign-in `flow` (the flow cookie; undefined when the browser sent none) with the
   * callback's query parameters; rejects with {@link SignInRefused}.
   */
  complete(flow: string | undefined, callback: URLSearchParams): Promise<CompletedSignIn>;
}

/** What the flow cookie holds, sealed. */
interface Flow {
  /** state */
  readonly st: string;
  /** PKCE code_verifier */
  readonly cv: string;
  /** OpenID nonce, when `openid` was asked for */
  readonly n?: string;
  /** redirect_uri, exactly as sent */
  readonly ru: string;
  /** where to go on */
  readonly nx?: string;
}

/** The key that seals flow cookies, derived from the console's signing key for this one use. */
function flowKey(signingKey: Uint8Array): Uint8Array {
  return createHmac("sha256", signingKey).update("chaoscore-console-oauth-flow-v1", "utf8").digest();
}

/** The error code and description of an OAuth error answer, as a person reads them. */
function described(error: string, description: string | undefined): string {
  return description ? `${error} (${description})` : error;
}

/**
 * The console's OAuth sign-in. The client secret is read now (a missing file stops the start,
 * naming the variable); the issuer's metadata on the first sign-in (the edge starts while the
 * issuer is down), then again after an hour.
 */
export async function createConsoleOAuthSignIn(options: ConsoleOAuthSignInOptions): Promise<ConsoleOAuthSignIn> {
  const { issuer, resource, verifier, logger } = options;
  const { clientId, clientSecret, clientSecretFile } = options.client;
  const secret = clientSecret ?? (clientSecretFile ? await readSecretFile("CHAOS_CORE_CONSOLE_OAUTH_CLIENT_SECRET_FILE", clientSecretFile) : undefined);
  if (!secret) throw new Error("CHAOS_CORE_CONSOLE_OAUTH_CLIENT_SECRET_FILE: the console's client secret is required");
  const key = flowKey(options.signingKey);
  const client: oauth.Client = { client_id: clientId };
  // config.ts allows http only to a loopback issuer (a local or test issuer); oauth4webapi
  // refuses http unless told, and still refuses it for an https issuer's endpoints.
  const insecure = new URL(issuer).protocol === "http:" ? { [oauth.allowInsecureRequests]: true } : {};
  const http = () => ({ ...insecure, signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });

  let metadata: { as: oauth.AuthorizationServer; at: number } | undefined;
  /** The issuer's metadata from the same locations, in the same order, as the resource server reads it. */
  const discover = async (): Promise<oauth.AuthorizationServer> => {
    if (metadata && Date.now() - metadata.at < METADATA_TTL_MS) return metadata.as;
    const { url, res } = await fetchAuthorizationServerMetadata(issuer, { timeoutMs: FETCH_TIMEOUT_MS });
    const as = await oauth.processDiscoveryResponse(new URL(issuer), res);
    // As the resource server checks `iss`: character for character, not merely the same URL.
    if (as.issuer !== issuer) throw new Error(`${url} names issuer ${JSON.stringify(as.issuer)}, not ${issuer}`);
    if (!as.authorization_endpoint || !as.token_endpoint) throw new Error(`${url} names no authorization_endpoint or token_endpoint`);
    // OAuth 2.1 and the MCP authorization spec: no S256 in the metadata means no PKCE; refuse to go on.
    if (!as.code_challenge_methods_supported?.includes("S256")) {
      throw new Error(`${url} does not list S256 in code_challenge_methods_supported: the console signs in only with PKCE`);
    }
    metadata = { as, at: Date.now() };
    return as;
  };

  /** The metadata, or a 503 page when the issuer cannot be read (logged for the operator). */
  const metadataOr503 = async (): Promise<oauth.AuthorizationServer> => {
    try {
      return await discover();
    } catch (err) {
      logger.warn({ err, issuer }, "console OAuth sign-in: the issuer's metadata cannot be used");
      throw new SignInRefused(503, "Sign-in unavailable", `The authorization server ${issuer} cannot be reached or its metadata cannot be used now; try again shortly.`, false);
    }
  };

  /** client_secret_basic unless the issuer lists only client_secret_post (RFC 8414's default is basic). */
  const clientAuth = (as: oauth.AuthorizationServer): oauth.ClientAuth => {
    const methods = as.token_endpoint_auth_methods_supported;
    if (!methods || methods.includes("client_secret_basic")) return oauth.ClientSecretBasic(secret);
    if (methods.includes("client_secret_post")) return oauth.ClientSecretPost(secret);
    throw new SignInRefused(503, "Sign-in unavailable", `The authorization server ${issuer} accepts neither client_secret_basic nor client_secret_post at its token endpoint.`, false);
  };

  const openFlow = async (sealed: string | undefined): Promise<Flow> => {
    const again = "Nothing was exchanged; start the sign-in again from the console.";
    if (!sealed) {
      throw new SignInRefused(
        400,
        "Sign-in not completed",
        `This browser has no sign-in in progress here: it was started in another browser or on another address, or its cookie was not kept. ${again}`,
        false,
      );
    }
    try {
      const { payload } = await jwtDecrypt(sealed, key, { keyManagementAlgorithms: ["dir"], contentEncryptionAlgorithms: ["A256GCM"] });
      const flow = payload as unknown as Flow;
      if (typeof flow.st !== "string" || typeof flow.cv !== "string" || typeof flow.ru !== "string") throw new Error("incomplete flow");
      return flow;
    } catch (err) {
      const expired = (err as { code?: string }).code === "ERR_JWT_EXPIRED";
      throw new SignInRefused(
        400,
        "Sign-in not completed",
        expired
          ? `This sign-in took longer than ${OAUTH_FLOW_SECONDS / 60} minutes. ${again}`
          : `This browser's sign-in cookie is not one this server made. ${again}`,
        false,
      );
    }
  };

  return {
    issuer,

    async start(redirectUri, next) {
      const as = await metadataOr503();
      const state = oauth.generateRandomState();
      const verifierValue = oauth.generateRandomCodeVerifier();
      // OpenID Connect when the issuer offers it: the ID token then binds the answer to this
      // flow by its nonce and names the same subject as the access token.
      const openid = as.scopes_supported?.includes("openid") ?? false;
      const nonce = openid ? oauth.generateRandomNonce() : undefined;
      const url = new URL(as.authorization_endpoint!);
      const params: Record<string, string> = {
        response_type: "code",
        client_id: clientId,
        redirect_uri: redirectUri,
        scope: openid ? `openid ${APPROVER_SCOPE}` : APPROVER_SCOPE,
        state,
        code_challenge: await oauth.calculatePKCECodeChallenge(verifierValue),
        code_challenge_method: "S256",
        // RFC 8707: a token for this resource, whose audience the verifier then requires.
        resource,
        ...(nonce ? { nonce } : {}),
      };
      for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
      const flow: Flow = { st: state, cv: verifierValue, ru: redirectUri, ...(nonce ? { n: nonce } : {}), ...(next ? { nx: next } : {}) };
      const sealed = await new EncryptJWT({ ...flow })
        .setProtectedHeader({ alg: "dir", enc: "A256GCM" })
        .setIssuedAt()
        .setExpirationTime(`${OAUTH_FLOW_SECONDS}s`)
        .encrypt(key);
      return { authorizationUrl: url.href, flow: sealed };
    },

    async complete(sealed, callback) {
      const flow = await openFlow(sealed);
      // The state first, in constant time, with its own words: an answer that belongs to another
      // browser's sign-in (a forged callback, a login CSRF) goes no further, not even to the issuer.
      if (!sameToken(callback.get("state") ?? "", flow.st)) {
        logger.warn({ issuer }, "console OAuth sign-in refused: the state does not match this browser's sign-in");
        throw new SignInRefused(
          400,
          "Sign-in refused",
          "The answer that came back does not belong to the sign-in this browser started (its state does not match), so it was refused and no code was exchanged. Start the sign-in again from the console.",
          false,
        );
      }
      const as = await metadataOr503();
      let params: URLSearchParams;
      try {
        params = oauth.validateAuthResponse(as, client, callback, flow.st);
      } catch (err) {
        if (err instanceof oauth.AuthorizationResponseError) {
          logger.info({ issuer, error: err.error }, "console OAuth sign-in: the issuer answered with an error");
          throw new SignInRefused(403, "Not signed in", `${issuer} did not sign you in: ${described(err.error, err.error_description)}.`, false);
        }
        logger.warn({ issuer, err: (err as Error).message }, "console OAuth sign-in refused: the authorization response is not acceptable");
        throw new SignInRefused(400, "Sign-in refused", `The answer that came back is not ${issuer}'s: ${(err as Error).message}. Nothing was exchanged.`, false);
      }
      let tokens: oauth.TokenEndpointResponse;
      try {
        const res = await oauth.authorizationCodeGrantRequest(as, client, clientAuth(as), params, flow.ru, flow.cv, {
          ...http(),
          additionalParameters: { resource },
        });
        tokens = await oauth.processAuthorizationCodeResponse(as, client, res, {
          expectedNonce: flow.n ?? oauth.expectNoNonce,
          requireIdToken: flow.n !== undefined,
        });
      } catch (err) {
        if (err instanceof SignInRefused) throw err;
        if (err instanceof oauth.ResponseBodyError) {
          logger.warn({ issuer, error: err.error, status: err.status }, "console OAuth sign-in refused: the token endpoint refused the code");
          throw new SignInRefused(
            400,
            "Sign-in refused",
            `${issuer} refused to exchange the code for a token: ${described(err.error, err.error_description)}. Start the sign-in again from the console.`,
            true,
          );
        }
        if (err instanceof oauth.OperationProcessingError || err instanceof oauth.WWWAuthenticateChallengeError) {
          logger.warn({ issuer, err: err.message }, "console OAuth sign-in refused: the token response is not acceptable");
          throw new SignInRefused(502, "Sign-in refused", `${issuer}'s token response cannot be used: ${err.message}.`, true);
        }
        logger.warn({ issuer, err: (err as Error).message }, "console OAuth sign-in: the token endpoint cannot be reached");
        throw new SignInRefused(503, "Sign-in unavailable", `${issuer}'s token endpoint cannot be reached now; start the sign-in again shortly.`, false);
      }
      let verified: VerifiedToken;
      try {
        // The resource server's own checks (issuer, audience = this resource, expiry, algorithms,
        // typ, subject, tenant); the approver scope is the caller's to check and explain.
        verified = await verifier.verify(tokens.access_token, { requiredScope: null });
      } catch (err) {
        if (!(err instanceof BearerRefusal)) throw err;
        if (err.error === "unavailable") throw new SignInRefused(503, "Sign-in unavailable", `${issuer}'s keys cannot be fetched now; try again shortly.`, false);
        logger.warn({ issuer, reason: err.message }, "console OAuth sign-in refused: the access token is not acceptable");
        throw new SignInRefused(403, "Sign-in refused", `The access token ${issuer} issued cannot be used here: ${err.message}.`, true);
      }
      const idSubject = oauth.getValidatedIdTokenClaims(tokens)?.sub;
      if (idSubject !== undefined && idSubject !== verified.identity.principal) {
        logger.warn({ issuer }, "console OAuth sign-in refused: the ID token and the access token name different subjects");
        throw new SignInRefused(403, "Sign-in refused", `${issuer}'s ID token and access token name different subjects; nobody was signed in.`, true);
      }
      return {
        identity: verified.identity,
        scopes: verified.scopes,
        ...(verified.expiresAt !== undefined ? { expiresAt: verified.expiresAt * 1000 } : {}),
        ...(flow.nx ? { next: flow.nx } : {}),
      };
    },
  };
}
