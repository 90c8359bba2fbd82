import { createServer, connect, type Server, type Socket } from "node:net";

/**
 * A TCP forwarder in front of a real server (Postgres, Redis), so a test can make that server
 * unreachable for a client and bring it back on the same address: `down()` closes the port and
 * cuts every open connection; `up()` listens on the same port again.
 */
export interface TcpProxy {
  readonly port: number;
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const s = createServer((inbound) => {
        const outbound = connect(target.port, target.host);
        for (const sock of [inbound, outbound]) {
          sockets.add(sock);
          sock.on("close", () => sockets.delete(sock));
          sock.on("error", () => undefined);
        }
        inbound.pipe(outbound).pipe(inbound);
        inbound.on("close", () => outbound.destroy());
        outbound.on("close", () => inbound.destroy());
      });
      s.once("error", reject);
      s.listen(port, "127.0.0.1", () => {
        const addr = s.address();
        if (addr && typeof addr === "object") port = addr.port;
        server = s;
        resolve();
      });
    });

  const down = async () => {
    const s = server;
    server = undefined;
    const closed = s ? new Promise<void>((resolve) => s.close(() => resolve())) : Promise.resolve();
    for (const sock of sockets) sock.destroy();
    await closed;
  };

  await listen();
  return {
    get port() {
      return port;
    },
    down,
    up: () => (server ? Promise.resolve() : listen()),
    close: down,
  };
}
