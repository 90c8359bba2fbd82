import { PassThrough } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { CallToolResult, JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import { runStdioTransport } from "../transport/stdio.js";
import type { ConnectOptions } from "./in-memory.js";

/**
 * The client end of a stdio pipe: newline-delimited JSON-RPC, framed by the SDK's own
 * `ReadBuffer` and `serializeMessage`, as its `StdioClientTransport` frames a child's pipes.
 */
class PipeClientTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  readonly #buffer = new ReadBuffer();

  constructor(
    private readonly toServer: PassThrough,
    private readonly fromServer: PassThrough,
  ) {}

  start(): Promise<void> {
    this.fromServer.on("data", (chunk: Buffer) => {
      this.#buffer.append(chunk);
      try {
        for (let m = this.#buffer.readMessage(); m !== null; m = this.#buffer.readMessage()) this.onmessage?.(m);
      } catch (err) {
        this.onerror?.(err as Error);
      }
    });
    return Promise.resolve();
  }

  send(message: JSONRPCMessage): Promise<void> {
    this.toServer.write(serializeMessage(message));
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.toServer.end();
    this.onclose?.();
    return Promise.resolve();
  }
}

/** A real SDK client speaking to the edge's stdio transport (tenant `default`, principal `local`) over in-process pipes. */
export interface StdioConnected {
  readonly client: Client;
  call(name: string, args: Record<string, unknown>): Promise<CallToolResult>;
  close(): Promise<void>;
}

/**
 * Serves one stdio session with {@link runStdioTransport} on pipes and connects a real SDK
 * client to it: the edge's stdio code path, without a child process.
 */
export async function connectStdio(deps: EdgeDeps, options: ConnectOptions = {}): Promise<StdioConnected> {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const running = await runStdioTransport(deps, { stdin, stdout });
  const client = new Client({ name: "edge-stdio-test", version: "1.0.0" }, { capabilities: options.capabilities ?? {} });
  options.setup?.(client);
  await client.connect(new PipeClientTransport(stdin, stdout));
  await client.listTools();
  return {
    client,
    call: async (name, args) => (await client.callTool({ name, arguments: args })) as CallToolResult,
    close: async () => {
      await client.close();
      await running.close();
    },
  };
}
