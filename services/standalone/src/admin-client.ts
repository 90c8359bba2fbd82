import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";

/** The file, in the data directory, that tells the operator's commands where the running server's admin endpoint listens. */
export const ADMIN_FILE = "admin.json";

/** What `admin.json` holds. */
export interface AdminFile {
  /** `http://127.0.0.1:<port>`: the admin endpoint's base URL. */
  readonly url: string;
  /** The bearer token every request must carry. */
  readonly token: string;
  /** The server's process id. */
  readonly pid: number;
  /** The approval console a person opens (`http://127.0.0.1:<port>/approvals`), once it serves. */
  readonly console_url?: string;
}

/** `admin.json` as a reader checks it. */
export const adminFileSchema = z.object({
  url: z.string().regex(/^http:\/\/127\.0\.0\.1:\d+$/, "must be http://127.0.0.1:<port>"),
  token: z.string().min(32),
  pid: z.number().int().positive(),
  console_url: z.string().regex(/^https?:\/\/\S+\/approvals$/, "must be the console's URL, ending in /approvals").optional(),
});

/**
 * The admin file of the server running on `dataDir`, for the operator's commands. The error
 * says what to do when no server is running there.
 */
export async function readAdminFile(dataDir: string): Promise<AdminFile> {
  const file = join(dataDir, ADMIN_FILE);
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      throw new Error(
        `no chaos-core server is running on ${dataDir} (no ${ADMIN_FILE} there): start \`chaos-core serve\` or \`chaos-core stdio\` ` +
          "with this CHAOS_CORE_DATA_DIR, or point CHAOS_CORE_DATA_DIR (or --data-dir) at the running server's data directory",
        { cause: err },
      );
    }
    throw new Error(`cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
  try {
    return adminFileSchema.parse(JSON.parse(text));
  } catch (err) {
    throw new Error(`${file} is not an admin file chaos-core wrote; restart the server to write it again`, { cause: err });
  }
}

/**
 * One request to the admin endpoint with its token. Resolves with the response when it is a
 * success; otherwise throws naming the server's error code and message, or that no server answers.
 */
export async function adminRequest(admin: AdminFile, method: "GET" | "POST" | "PUT", path: string, body?: Record<string, unknown>): Promise<Response> {
  let res: Response;
  // A bound on reaching the server and its answer starting, not on reading it: an export streams for as long as it needs.
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(new Error("no answer within 30 s")), 30_000);
  try {
    res = await fetch(`${admin.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${admin.token}`, ...(body ? { "content-type": "application/json" } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
      signal: timeout.signal,
    });
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
    throw new Error(
      `no chaos-core server answers at ${admin.url} (pid ${admin.pid}, ${cause}): it may have stopped without removing ${ADMIN_FILE}; start it again`,
      { cause: err },
    );
  } finally {
    clearTimeout(timer);
  }
  if (!res.ok) {
    const answer = (await res.json().catch(() => ({}))) as { error?: { code?: string; message?: string } };
    const error = answer.error ?? {};
    throw new Error(`${error.code ?? `HTTP ${res.status}`}: ${error.message ?? "the server refused"}`);
  }
  return res;
}
