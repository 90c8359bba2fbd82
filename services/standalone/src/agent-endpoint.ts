import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { removeIfOurs, writePrivateFile } from "./private-file.js";

/**
 * The file, in the data directory, through which the process serving it offers its MCP endpoint
 * to `chaos-core stdio` processes started on the same directory (docs/protocol.md §16): they
 * relay their host's connection there as the local agent instead of failing on the lock.
 */
export const AGENT_FILE = "agent.json";

/** What `agent.json` holds. */
export interface AgentFile {
  /** The serving process's MCP endpoint on loopback: `http://127.0.0.1:<port>/mcp` (or `localhost`, as it was bound). */
  readonly url: string;
  /**
   * The local agent's credential: a bearer that endpoint takes, from loopback, as tenant `default`,
   * principal `local`, with no roles — never the operator's (admin.json) nor an approver's.
   */
  readonly token: string;
  readonly pid: number;
  /** How the serving process was started. */
  readonly mode: "serve" | "stdio";
}

const agentFileSchema = z.object({
  url: z.string().regex(/^http:\/\/(?:127(?:\.\d{1,3}){3}|localhost):\d+\/mcp$/, "must be a loopback http URL ending in /mcp"),
  token: z.string().min(32),
  pid: z.number().int().positive(),
  mode: z.enum(["serve", "stdio"]),
});

/** A fresh local agent credential: 256 random bits, base64url. */
export function newAgentToken(): string {
  return randomBytes(32).toString("base64url");
}

/** The published endpoint, written mode 0600; `close` removes it while it is still this process's. */
export async function publishAgentEndpoint(dataDir: string, endpoint: Omit<AgentFile, "pid">): Promise<{ close(): Promise<void> }> {
  const file = join(dataDir, AGENT_FILE);
  const content: AgentFile = { ...endpoint, pid: process.pid };
  await writePrivateFile(file, `${JSON.stringify(content)}\n`);
  return { close: () => removeIfOurs(file, endpoint.token) };
}

/** The endpoint the process serving `dataDir` published, or undefined when there is none it could have written. */
export async function readAgentEndpoint(dataDir: string): Promise<AgentFile | undefined> {
  const text = await readFile(join(dataDir, AGENT_FILE), "utf8").catch(() => undefined);
  if (text === undefined) return undefined;
  try {
    return agentFileSchema.parse(JSON.parse(text));
  } catch {
    return undefined;
  }
}

/**
 * The loopback URL a relay reaches a listener bound to `host` at, or undefined when the listener
 * is not on loopback (bound to one other interface only: a relay on this machine cannot count on it).
 */
export function loopbackMcpUrl(host: string, port: number): string | undefined {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  // A wildcard bind answers on 127.0.0.1; localhost (which may resolve to ::1 first) and a
  // 127.x address are asked for by the name they were bound to.
  if (h === "0.0.0.0" || h === "::") return `http://127.0.0.1:${port}/mcp`;
  return h === "localhost" || /^127(?:\.\d{1,3}){3}$/.test(h) ? `http://${h}:${port}/mcp` : undefined;
}
