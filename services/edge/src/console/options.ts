import type { ApiKeyVerifier } from "../auth/api-keys.js";
import type { CredentialDirectory } from "../auth/directory.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import type { ConsoleOAuthClient, ConsoleOAuthSignIn } from "./oauth-sign-in.js";
import type { ConsoleSessionStore } from "./sessions.js";
import type { SignInLinks } from "./sign-in-links.js";

/** The API keys the console checks: the same verifier as `/mcp`, watched or fixed. */
export interface ConsoleKeys extends ApiKeyVerifier {
  /** Takes in an edit of the keys file before a check (a watched file). */
  refresh?(): Promise<void>;
  /** Whether the keys file on disk cannot be read (every key is refused then). */
  unreadable?(): boolean;
}

/** What the console router is built from. */
export interface ConsoleRouterOptions {
  /** The services the console reads (and answers through, with its answer forms). */
  readonly deps: Pick<EdgeDeps, "cognition" | "ledger" | "logger" | "operator">;
  readonly sessions: ConsoleSessionStore;
  /** The server's API keys file; absent when it has none. */
  readonly keys?: ConsoleKeys;
  /**
   * The tenant registry (docs/tenants.md): its keys (`cc_…`) sign in too, and a tenant it disables
   * ends its console sessions at their next request.
   */
  readonly directory?: CredentialDirectory;
  /** The standalone operator's one-time links; absent outside standalone. */
  readonly signInLinks?: SignInLinks;
  /** Sign-in through the edge's OAuth issuer ("Sign in with …"); absent when not configured. */
  readonly oauthSignIn?: ConsoleOAuthSignIn;
  /** `CHAOS_CORE_PUBLIC_URL`: requests under its host are on its origin, path prefix and scheme. */
  readonly publicUrl?: string;
  /** Signs the sign-in forms' tokens ({@link consoleSigningKey}). */
  readonly signingKey: Uint8Array;
}

/**
 * How a listener serves the console (`HttpTransportOptions.console`, `startConsoleListener`):
 * what the composer chooses; the keys and the services come from the listener itself.
 */
export interface ConsoleServeOptions {
  /** `CHAOS_CORE_PUBLIC_URL`, when set. */
  readonly publicUrl?: string;
  /** Where sessions live: Redis when the edge has it (every replica serves them), in-process by default. */
  readonly sessions?: ConsoleSessionStore;
  /** The standalone operator's one-time links (`chaos-core approvals console`). */
  readonly signInLinks?: SignInLinks;
  /** Signs the sign-in forms' tokens; random for this process by default ({@link consoleSigningKey}). */
  readonly signingKey?: Uint8Array;
  /**
   * The console's own client at the edge's OAuth issuer (`CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID` and
   * `…_CLIENT_SECRET_FILE`): people then sign in through the issuer too. Needs the listener's OAuth.
   */
  readonly oauthClient?: ConsoleOAuthClient;
}
