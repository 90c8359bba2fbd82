import { createHash, timingSafeEqual } from "node:crypto";
import { readFile } from "node:fs/promises";
import { z } from "zod";
import { assertTenantId } from "@chaos-core/kit";
import { ROLES, type Identity } from "./identity.js";

const SHA256_HEX = /^[0-9a-f]{64}$/;

const ApiKeyEntrySchema = z.object({
  tenant: z.string().superRefine((tenant, ctx) => {
    try {
      assertTenantId(tenant);
    } catch (err) {
      ctx.addIssue({ code: "custom", message: (err as Error).message });
    }
  }),
  principal: z.string().min(1).max(256),
  sha256: z
    .string()
    .transform((s) => s.toLowerCase())
    .refine((s) => SHA256_HEX.test(s), "must be the lowercase hex SHA-256 of the key (64 characters)"),
  roles: z
    .array(z.enum(ROLES))
    .max(ROLES.length)
    .refine((roles) => new Set(roles).size === roles.length, "lists a role twice")
    .optional()
    .describe('Roles granted to the key; only "approver" exists'),
});

const ApiKeyFileSchema = z.array(ApiKeyEntrySchema).min(1, "lists no keys");

/** One operator-issued API key: only its SHA-256 is ever stored. */
export type ApiKeyEntry = z.infer<typeof ApiKeyEntrySchema>;

/** Resolves a bearer key to the identity it was issued to. */
export interface ApiKeyVerifier {
  /** The identity of `key`, or undefined when no entry matches. */
  verify(key: string): Identity | undefined;
}

/** The SHA-256 an API keys file stores for a key (lowercase hex). */
export function hashApiKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

function identityOf(e: ApiKeyEntry): Identity {
  return Object.freeze({ tenant: e.tenant, principal: e.principal, roles: Object.freeze([...(e.roles ?? [])]) });
}

/**
 * A verifier over a list of hashed keys. Every entry is compared, each in constant time, so
 * the time taken says nothing about which entry (or how much of it) matched.
 */
export function createApiKeyVerifier(entries: readonly ApiKeyEntry[]): ApiKeyVerifier {
  const parsed = ApiKeyFileSchema.parse(entries);
  const hashes = parsed.map((e) => ({ hash: Buffer.from(e.sha256, "hex"), identity: identityOf(e) }));
  return {
    verify(key) {
      const given = createHash("sha256").update(key, "utf8").digest();
      let found: Identity | undefined;
      for (const entry of hashes) {
        if (timingSafeEqual(entry.hash, given) && !found) found = entry.identity;
      }
      return found;
    },
  };
}

/**
 * Reads an API keys file: a JSON list of `{tenant, principal, sha256, roles?}`. Fails with a message
 * that names the file and the bad entry; never echoes a hash.
 */
export async function loadApiKeysFile(path: string): Promise<ApiKeyVerifier> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(path, "utf8"));
  } catch (err) {
    throw new Error(`CHAOS_CORE_API_KEYS_FILE ${path}: cannot be read as JSON (${(err as Error).message})`, {
      cause: err,
    });
  }
  const result = ApiKeyFileSchema.safeParse(raw);
  if (!result.success) {
    const problems = result.error.issues.map((i) => {
      const where = i.path.map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`)).join("");
      return `${where || "(file)"}: ${i.message}`;
    });
    throw new Error(`CHAOS_CORE_API_KEYS_FILE ${path}: ${problems.join("; ")}`);
  }
  return createApiKeyVerifier(result.data);
}
