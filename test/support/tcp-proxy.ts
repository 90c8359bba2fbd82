import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";

/**
 * A TCP proxy in front of a real server (the machine's Postgres), which a test can cut and
 * restore on the same port: a store outage as the service sees it (connections reset, new ones
 * refused), without touching the server other tests share.
 */
export interface TcpProxy {
  readonly port: number;
  /** Closes every connection and stops listening: connects are refused until {@link restore}. */
  cut(): Promise<void>;
  /** Listens again on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const track = (s: Socket) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  };
  const make = (): Server =>
    createServer((client) => {
      track(client);
      const upstream = connect(targetPort, targetHost);
      track(upstream);
      client.pipe(upstream).pipe(client);
      client.on("error", () => upstream.destroy());
      upstream.on("error", () => client.destroy());
    });
  let server = make();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  const cut = async () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of sockets) s.destroy();
    await closed;
  };
  return {
    port,
    cut,
    async restore() {
      server = make();
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, "127.0.0.1", resolve);
      });
    },
    async close() {
      if (server.listening) await cut();
    },
  };
}
