import { spawn } from "node:child_process";
import { CLI, childEnv, ROOT, stopProcess } from "./processes.js";

/** A `chaos-core stdio` process spoken to in raw lines, for what an SDK client would never send. */
export interface StdioLines {
  /** Writes one line (a newline is added); bytes go out exactly as given. */
  send(line: string | Buffer): void;
  /** Resolves with the reply whose id is `id` (JSON-RPC ids are matched by value). */
  reply(id: string | number | null, timeoutMs?: number): Promise<Record<string, unknown>>;
  stderr(): string;
  stop(): Promise<void>;
}

/** Starts `chaos-core stdio` and collects every stdout line as a JSON-RPC message, by id. */
export function startStdioLines(env: Record<string, string | undefined>): StdioLines {
  const proc = spawn(process.execPath, [CLI, "stdio"], { cwd: ROOT, env: childEnv(env), stdio: ["pipe", "pipe", "pipe"] });
  let err = "";
  proc.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const replies = new Map<string, Array<Record<string, unknown>>>();
  const waiters = new Map<string, (msg: Record<string, unknown>) => void>();
  const keyOf = (id: unknown) => JSON.stringify(id ?? null);
  let buffered = "";
  proc.stdout!.on("data", (d: Buffer) => {
    buffered += d.toString("utf8");
    let newline: number;
    while ((newline = buffered.indexOf("\n")) !== -1) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      if (!line.trim()) continue;
      const msg = JSON.parse(line) as Record<string, unknown>;
      if (!("id" in msg)) continue; // a notification
      const key = keyOf(msg.id);
      const waiter = waiters.get(key);
      if (waiter) {
        waiters.delete(key);
        waiter(msg);
      } else {
        replies.set(key, [...(replies.get(key) ?? []), msg]);
      }
    }
  });
  return {
    send: (line) => proc.stdin!.write(Buffer.concat([typeof line === "string" ? Buffer.from(line) : line, Buffer.from("\n")])),
    reply: (id, timeoutMs = 60_000) => {
      const key = keyOf(id);
      const queued = replies.get(key);
      if (queued?.length) {
        const [first, ...rest] = queued;
        replies.set(key, rest);
        return Promise.resolve(first!);
      }
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no reply with id ${key} in ${timeoutMs} ms:\n${err}`)), timeoutMs);
        waiters.set(key, (msg) => {
          clearTimeout(timer);
          resolve(msg);
        });
      });
    },
    stderr: () => err,
    stop: async () => {
      proc.stdin!.end();
      await stopProcess(proc);
    },
  };
}
