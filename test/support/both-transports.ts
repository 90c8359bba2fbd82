import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { seedDataDir } from "./data-dir-template.js";
import { allStarted, httpClient, removeDir, startServe, stdioClient, tempDir, type ServeProcess } from "./processes.js";

/**
 * `chaos-core serve` with an SDK client over Streamable HTTP and `chaos-core stdio` as an SDK
 * client's subprocess, each on its own copy of the run's pre-built data directory, started
 * together: what the e2e files that hold both transports to the same answers share.
 */
export interface BothTransports {
  /** The data directories: serve's, then stdio's. */
  readonly dirs: readonly [string, string];
  readonly serve: ServeProcess;
  readonly overHttp: Client;
  readonly overStdio: Client;
  /** Seeds the directories, lets `prepare` write into each (a policy file), and starts both. */
  start(prepare?: (dataDir: string) => void): Promise<void>;
  /** Closes the clients and stops whatever started, then removes the directories. */
  close(): Promise<void>;
}

export function bothTransports(): BothTransports {
  const dirs = [tempDir(), tempDir()] as const;
  let serve: ServeProcess | undefined;
  let overHttp: Client | undefined;
  let overStdio: Client | undefined;
  const started = <T>(v: T | undefined, what: string): T => {
    if (v === undefined) throw new Error(`${what} has not started`);
    return v;
  };
  return {
    dirs,
    get serve() {
      return started(serve, "chaos-core serve");
    },
    get overHttp() {
      return started(overHttp, "the HTTP client");
    },
    get overStdio() {
      return started(overStdio, "the stdio client");
    },
    async start(prepare) {
      await Promise.all(dirs.map(seedDataDir));
      if (prepare) dirs.forEach(prepare);
      await allStarted([
        startServe({ CHAOS_CORE_DATA_DIR: dirs[0] }).then(async (s) => {
          serve = s;
          overHttp = await httpClient(s.url);
        }),
        stdioClient({ CHAOS_CORE_DATA_DIR: dirs[1] }).then((s) => (overStdio = s.client)),
      ]);
    },
    async close() {
      await overHttp?.close();
      await overStdio?.close();
      await serve?.stop();
      dirs.forEach(removeDir);
    },
  };
}
