import { readFile } from "node:fs/promises";
import { isAbsolute, join, normalize, sep } from "node:path";
import { z } from "zod";
import { upstreamExposureSchema, type UpstreamExposureRule } from "./upstream-exposure.js";
import { ChaosError } from "./errors.js";
import { RISKS } from "./ledger-policy.js";
import { describeZodIssues } from "./zod-issues.js";

/**
 * An upstream MCP server as an operator declares it (docs/federation.md §3). Its shape lives in
 * kit because three places read it: cognition connects to upstreams, the standalone's `chaos-core
 * upstreams` commands pin them, and the tenant registry (policy) checks a tenant's declarations
 * when they are stored — so a typo fails the operator's command, never a tenant's call.
 */

/** An upstream's name: the capability prefix (`files.read_text_file`), lower case. */
export const UPSTREAM_NAME_RE = /^[a-z][a-z0-9_]{0,31}$/;

/**
 * Names an upstream may not take: the first segments of Chaos Core's own capabilities and tools
 * (cognition's test holds every built-in capability's prefix to this list).
 */
export const RESERVED_UPSTREAM_NAMES: readonly string[] = Object.freeze(["chaoscore", "cognition", "council", "http", "memory"]);

/** The only environment variables an `{"env": …}` secret reference may name. */
export const UPSTREAM_SECRET_ENV_PREFIX = "CHAOS_CORE_UPSTREAM_SECRET_";

/** How long an upstream call may take when its declaration does not say (ms). */
export const DEFAULT_UPSTREAM_TIMEOUT_MS = 30_000;

const SECRET_FILE_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
// RFC 9110 token characters.
const HEADER_NAME_RE = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;

const prefix = z.string().max(64, "must be at most 64 characters").optional();

const envRef = z.strictObject({
  env: z
    .string()
    .regex(new RegExp(`^${UPSTREAM_SECRET_ENV_PREFIX}[A-Z0-9_]+$`), `must name a variable whose name starts with ${UPSTREAM_SECRET_ENV_PREFIX} (upper case)`),
  prefix,
});
const fileRef = z.strictObject({
  file: z
    .string()
    .regex(SECRET_FILE_RE, "must be a bare file name inside CHAOS_CORE_UPSTREAM_SECRETS_DIR (no / and no ..)")
    .refine((f) => !f.includes(".."), "must not contain .."),
  prefix,
});

/**
 * A reference to a secret, never the secret itself: a variable under
 * {@link UPSTREAM_SECRET_ENV_PREFIX} (`{"env": …}`), or a bare file name in
 * `CHAOS_CORE_UPSTREAM_SECRETS_DIR` (`{"file": …}`). Confined so no declaration can send
 * `DATABASE_URL` or the ledger's keyring to an upstream. `prefix` is put before the value
 * (`"Bearer "`). The form is chosen by its key, so a problem is named at its field.
 */
export const secretRefSchema = z.unknown().transform((value, ctx): SecretRef => secretRefOf(value, ctx));

/** {@link secretRefSchema}'s check, for a field that takes a reference among other forms. */
function secretRefOf(value: unknown, ctx: z.RefinementCtx): SecretRef {
  const form = typeof value === "object" && value !== null ? ("env" in value ? envRef : "file" in value ? fileRef : undefined) : undefined;
  if (!form) {
    ctx.addIssue({ code: "custom", message: 'must be a secret reference: {"env": "CHAOS_CORE_UPSTREAM_SECRET_…"} or {"file": "…"}' });
    return z.NEVER;
  }
  const parsed = form.safeParse(value, { reportInput: true });
  if (parsed.success) return parsed.data;
  // Passed on as zod raised them (an unknown key stays one), at their depth below this value.
  for (const issue of parsed.error.issues) ctx.addIssue(issue as Parameters<typeof ctx.addIssue>[0]);
  return z.NEVER;
}
export type SecretRef = { readonly env: string; readonly prefix?: string } | { readonly file: string; readonly prefix?: string };

const STDIO_ONLY = ["args", "env", "cwd", "isolation"] as const;

const httpsOrLoopbackUrl = z
  .string()
  .url("must be an http or https URL")
  .refine((u) => /^https?:$/.test(new URL(u).protocol), "must be an http or https URL");

/**
 * How cognition authenticates to a Streamable HTTP upstream beside static headers
 * (docs/federation-platform.md §3), as an OAuth 2.1 client of the upstream's authorization server
 * (its token endpoint found by RFC 8414 discovery), every token audience-bound to the upstream
 * (`resource`, RFC 8707; the upstream's URL by default) and cached no longer than its `expires_in`
 * and `CHAOS_CORE_UPSTREAM_TOKEN_MAX_SECONDS`:
 * - `client_credentials`: the tenant's machine identity, one token per upstream and pool scope;
 * - `token_exchange` (RFC 8693): the caller's verified access token exchanged for one of the same
 *   person, per principal; a caller without one (an API key's, the local user) gets `fallback`:
 *   `refuse` (the default) or `client_credentials`.
 */
const authSchema = z
  .strictObject({
    type: z.enum(["client_credentials", "token_exchange"]),
    issuer: httpsOrLoopbackUrl,
    clientId: z.string().min(1, "must not be empty").max(256),
    clientSecret: z.unknown().pipe(secretRefSchema),
    scope: z.string().min(1).max(1024).optional(),
    resource: httpsOrLoopbackUrl.optional(),
    fallback: z.enum(["refuse", "client_credentials"]).optional(),
  })
  .superRefine((auth, ctx) => {
    if (auth.fallback !== undefined && auth.type !== "token_exchange") ctx.addIssue({ code: "custom", path: ["fallback"], message: 'applies to type "token_exchange" only' });
  });
export type UpstreamAuth = z.output<typeof authSchema>;

/**
 * The declaration as written: every field of either transport, so an unknown or misplaced field is
 * named with the fields accepted; exactly one of `url` (Streamable HTTP) and `command` (stdio).
 */
const declarationSchema = z
  .strictObject({
    name: z
      .string()
      .regex(UPSTREAM_NAME_RE, "must be 1-32 characters of a-z, 0-9 and _, starting with a letter (it becomes the capability prefix)")
      .refine((n) => !RESERVED_UPSTREAM_NAMES.includes(n), { message: "is reserved for Chaos Core's own capabilities" }),
    url: z
      .string()
      .url("must be an http or https URL")
      .refine((u) => /^https?:$/.test(new URL(u).protocol), "must be an http or https URL")
      .refine((u) => new URL(u).username === "" && new URL(u).password === "", "must not carry credentials: reference them in headers")
      .optional(),
    /** Static headers (Streamable HTTP), each value a secret reference: a literal would be readable back. */
    headers: z
      .record(
        z.string().regex(HEADER_NAME_RE, "must be an HTTP header name"),
        z
          .unknown()
          .refine((value) => typeof value !== "string", 'a literal value would be readable back: reference it, {"env": "CHAOS_CORE_UPSTREAM_SECRET_…"} or {"file": "…"}')
          .pipe(secretRefSchema),
      )
      .optional(),
    /** OAuth for a Streamable HTTP upstream: a token from its authorization server on every request. */
    auth: authSchema.optional(),
    command: z.string().min(1, "must name the command to start").max(4096).optional(),
    args: z.array(z.string().max(4096)).max(64, "must hold at most 64 arguments").optional(),
    /** The only environment a stdio upstream gets, beside a minimal base (PATH, HOME, LANG): a value, or a secret reference. */
    env: z
      .record(
        z.string().regex(ENV_NAME_RE, "must be an environment variable name"),
        z.unknown().transform((v, ctx): string | SecretRef => {
          if (typeof v !== "string") return secretRefOf(v, ctx);
          if (v.length > 32_768) ctx.addIssue({ code: "custom", message: "must be at most 32768 characters" });
          return v;
        }),
      )
      .optional(),
    /** Its working directory, inside its own folder of the data directory (`upstreams/<name>/`). */
    cwd: z
      .string()
      .max(256)
      .refine((c) => !isAbsolute(c) && !normalize(c).split(sep).includes(".."), "must be a relative path inside the upstream's folder")
      .optional(),
    /** `tenant`: one process per tenant it serves (a server that keeps state); `shared`: one for all. */
    isolation: z.enum(["shared", "tenant"]).optional(),
    timeoutMs: z.number().int("must be a whole number").min(100, "must be at least 100").max(600_000, "must be at most 600000").optional(),
    /** The operator's risk for the upstream's tools, over what their annotations imply (docs/federation.md §5). */
    risk: z.strictObject({ default: z.enum(RISKS).optional(), tools: z.record(z.string().min(1).max(128), z.enum(RISKS)).optional() }).optional(),
    /** false: the upstream's annotations are not read; every tool is high unless `risk` says otherwise. */
    trustAnnotations: z.boolean().optional(),
    disabled: z.boolean().optional(),
    /** Which tenants and principals are offered its tools, and how (upstream-exposure.ts); the local tenant only by default. */
    exposure: upstreamExposureSchema.optional(),
  })
  .superRefine((u, ctx) => {
    if ((u.url === undefined) === (u.command === undefined)) {
      ctx.addIssue({ code: "custom", path: [], message: u.url === undefined ? "give url (Streamable HTTP) or command (stdio)" : "give url (Streamable HTTP) or command (stdio), not both" });
      return;
    }
    if (u.url !== undefined) {
      for (const field of STDIO_ONLY) if (u[field] !== undefined) ctx.addIssue({ code: "custom", path: [field], message: "applies to a stdio upstream (command) only" });
    } else {
      for (const field of ["headers", "auth"] as const) if (u[field] !== undefined) ctx.addIssue({ code: "custom", path: [field], message: "applies to a Streamable HTTP upstream (url) only" });
    }
  });

interface DeclarationCommon {
  readonly name: string;
  readonly timeoutMs: number;
  readonly risk?: { readonly default?: (typeof RISKS)[number]; readonly tools?: Readonly<Record<string, (typeof RISKS)[number]>> };
  readonly trustAnnotations: boolean;
  readonly disabled: boolean;
  /** As declared; absent, {@link DEFAULT_UPSTREAM_EXPOSURE} applies. */
  readonly exposure?: readonly UpstreamExposureRule[];
}
/** A Streamable HTTP upstream, as validated. */
export interface HttpUpstreamDeclaration extends DeclarationCommon {
  readonly transport: "http";
  readonly url: string;
  readonly headers: Readonly<Record<string, SecretRef>>;
  /** OAuth client credentials; absent: the static headers alone. */
  readonly auth?: UpstreamAuth;
}
/** A stdio upstream (the operator's file only), as validated. */
export interface StdioUpstreamDeclaration extends DeclarationCommon {
  readonly transport: "stdio";
  readonly command: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string | SecretRef>>;
  readonly cwd?: string;
  readonly isolation: "shared" | "tenant";
}
export type UpstreamDeclaration = HttpUpstreamDeclaration | StdioUpstreamDeclaration;

/** One declared upstream, defaults filled in; exactly one of `url` and `command`. */
export const upstreamDeclarationSchema = declarationSchema.transform((u): UpstreamDeclaration => {
  const base: DeclarationCommon = {
    name: u.name,
    timeoutMs: u.timeoutMs ?? DEFAULT_UPSTREAM_TIMEOUT_MS,
    ...(u.risk ? { risk: u.risk } : {}),
    trustAnnotations: u.trustAnnotations ?? true,
    disabled: u.disabled ?? false,
    ...(u.exposure ? { exposure: u.exposure } : {}),
  };
  if (u.url !== undefined) return { ...base, transport: "http", url: u.url, headers: u.headers ?? {}, ...(u.auth ? { auth: u.auth } : {}) };
  return { ...base, transport: "stdio", command: u.command!, args: u.args ?? [], env: u.env ?? {}, ...(u.cwd !== undefined ? { cwd: u.cwd } : {}), isolation: u.isolation ?? "shared" };
});

/** The operator's upstreams file: `{"upstreams": [...]}`, names unique. */
export const upstreamsFileSchema = z
  .strictObject({ upstreams: z.array(upstreamDeclarationSchema).max(256, "must hold at most 256 upstreams") })
  .superRefine((file, ctx) => {
    const seen = new Map<string, number>();
    file.upstreams.forEach((u, i) => {
      const first = seen.get(u.name);
      if (first !== undefined) ctx.addIssue({ code: "custom", path: ["upstreams", i, "name"], message: `"${u.name}" is declared twice (also upstreams[${first}])` });
      else seen.set(u.name, i);
    });
  });

/**
 * The operator's upstream declarations from the text of `source` (a file path, for messages).
 * @throws ChaosError `invalid_argument` naming the file and each field at its depth.
 */
export function parseUpstreamsFile(text: string, source: string): UpstreamDeclaration[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new ChaosError("invalid_argument", `${source}: not JSON (${(err as Error).message})`);
  }
  const parsed = upstreamsFileSchema.safeParse(value, { reportInput: true });
  if (!parsed.success) {
    throw new ChaosError("invalid_argument", `${source}: ${describeZodIssues(parsed.error, upstreamsFileSchema, "(file)").join("; ")}`);
  }
  return parsed.data.upstreams;
}

/** Where secret references are read from. */
export interface SecretSources {
  /** The process environment (only {@link UPSTREAM_SECRET_ENV_PREFIX} variables are ever read). */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** `CHAOS_CORE_UPSTREAM_SECRETS_DIR`; unset: `{"file": …}` references cannot be resolved. */
  readonly secretsDir?: string;
}

/** Names a reference without its value, for messages. */
export function describeSecretRef(ref: SecretRef): string {
  return "env" in ref ? `$${ref.env}` : `file ${ref.file}`;
}

/**
 * The value a secret reference stands for (with its prefix). Fails closed, naming the reference
 * and never a value: a variable that is unset or empty, a file missing or empty.
 * @throws ChaosError `failed_precondition`
 */
export async function resolveSecretRef(ref: SecretRef, sources: SecretSources): Promise<string> {
  let value: string | undefined;
  if ("env" in ref) {
    // The schema confines the name; checked again here, for a reference built by code.
    if (!ref.env.startsWith(UPSTREAM_SECRET_ENV_PREFIX)) throw new ChaosError("failed_precondition", `secret reference ${describeSecretRef(ref)} is outside ${UPSTREAM_SECRET_ENV_PREFIX}*`);
    value = sources.env[ref.env];
  } else {
    if (!sources.secretsDir) throw new ChaosError("failed_precondition", `secret reference ${describeSecretRef(ref)} needs CHAOS_CORE_UPSTREAM_SECRETS_DIR to be set`);
    if (!SECRET_FILE_RE.test(ref.file) || ref.file.includes("..")) throw new ChaosError("failed_precondition", `secret reference ${describeSecretRef(ref)} is not a bare file name`);
    value = await readFile(join(sources.secretsDir, ref.file), "utf8").then(
      (text) => text.replace(/\r?\n$/, ""),
      () => undefined,
    );
  }
  if (value === undefined || value === "") throw new ChaosError("failed_precondition", `secret reference ${describeSecretRef(ref)} has no value`);
  return `${ref.prefix ?? ""}${value}`;
}
