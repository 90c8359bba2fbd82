import type { Readable } from "node:stream";
import { STDIO_DEFAULT_MAX_BUFFER_SIZE, type JSONRPCMessage } from "@modelcontextprotocol/server";
import { envelopeRefusal, payloadTooLargeMessage, screenMessage, type Refusal } from "./incoming.js";

/** A line parsed into a message, or why it may not go on. */
type Screened = { refusal: Refusal } | { message: JSONRPCMessage };

/** Why a line cannot go on (bad JSON would be dropped without an answer, bad bytes decoded lossily), or its message. */
function screenLine(line: Buffer): Screened {
  const screened = screenMessage(line);
  if (screened.refusal) return { refusal: screened.refusal };
  let value: unknown;
  try {
    value = JSON.parse(line.toString("utf8"));
  } catch {
    return { refusal: { id: screened.id ?? null, error: { code: -32700, message: "Parse error: Invalid JSON" } } };
  }
  const refusal = envelopeRefusal(value, screened.id);
  return refusal ? { refusal } : { message: value as JSONRPCMessage };
}

/** The longest line served: the SDK's own limit, which used to end the session when a line passed it. */
export const MAX_LINE_BYTES = STDIO_DEFAULT_MAX_BUFFER_SIZE;

/** What {@link readScreenedLines} tells its caller. */
export interface ScreenedLineHooks {
  /** A line refused on its raw bytes or its envelope (incoming.ts): answer it; nothing else sees it. */
  refuse(refusal: Refusal): void;
  /** A line that may go on: its message, and its raw bytes (without the newline). */
  accept(message: JSONRPCMessage, line: Buffer): void;
  /** stdin ended. */
  end(): void;
  /** stdin failed. */
  error(err: Error): void;
}

/**
 * Reads newline-delimited JSON-RPC from `stdin`, each line screened on its raw bytes first
 * (see incoming.ts) — what `chaos-core stdio` serves, or relays, is refused alike. A line longer
 * than {@link MAX_LINE_BYTES} is skipped to its end and refused as HTTP refuses a body too large;
 * a blank line is no message.
 */
export function readScreenedLines(stdin: Readable, hooks: ScreenedLineHooks): { stop: () => void } {
  let pending: Buffer[] = [];
  let size = 0;
  let skipping = false;
  const tooLarge: Refusal = { id: null, error: { code: -32000, message: payloadTooLargeMessage(MAX_LINE_BYTES) } };
  const accept = (line: Buffer) => {
    const screened = screenLine(line);
    if ("refusal" in screened) hooks.refuse(screened.refusal);
    else hooks.accept(screened.message, line);
  };
  const onData = (chunk: Buffer) => {
    for (let start = 0; start < chunk.length; ) {
      const newline = chunk.indexOf(0x0a, start);
      const end = newline === -1 ? chunk.length : newline;
      if (!skipping) {
        pending.push(chunk.subarray(start, end));
        size += end - start;
        if (size > MAX_LINE_BYTES) {
          skipping = true;
          pending = [];
          hooks.refuse(tooLarge);
        }
      }
      if (newline === -1) break;
      if (!skipping) {
        const line = Buffer.concat(pending);
        if (line.toString("latin1").trim() !== "") accept(line);
      }
      pending = [];
      size = 0;
      skipping = false;
      start = newline + 1;
    }
  };
  const onEnd = () => hooks.end();
  const onError = (err: Error) => hooks.error(err);
  stdin.on("data", onData).once("end", onEnd).on("error", onError);
  return {
    stop: () => {
      stdin.off("data", onData).off("end", onEnd).off("error", onError);
      if (stdin.listenerCount("data") === 0) stdin.pause();
    },
  };
}
