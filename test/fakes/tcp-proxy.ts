/**
 * A loopback TCP relay in front of a real server (Postgres, for tests of a database that goes
 * away): clients connect to the relay's port, which forwards bytes both ways. `cut()` closes
 * every relayed connection and stops listening (the database is down or unreachable, its
 * connections reset, new ones refused); `restore()` listens again on the same port. `freeze()`
 * forwards nothing any more but closes nothing either (packets dropped: calls hang, they do not
 * fail); `thaw()` forwards again.
 */
import { connect, createServer, type Server, type Socket } from "node:net";

export interface TcpProxy {
  readonly port: number;
  cut(): Promise<void>;
  restore(): Promise<void>;
  freeze(): void;
  thaw(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
  };
  let frozen = false;
  let waiting: Socket[] = [];
  const connectUpstream = (client: Socket) => {
    const upstream = connect(target.port, target.host);
    track(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  };
  const relay = (client: Socket) => {
    track(client);
    if (!frozen) return connectUpstream(client);
    client.pause();
    waiting.push(client);
  };
  let server: Server | null = null;
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      const s = createServer(relay);
      s.once("error", reject);
      s.listen(port, "127.0.0.1", () => {
        server = s;
        const address = s.address();
        resolve(typeof address === "object" && address ? address.port : port);
      });
    });
  const stop = async () => {
    const s = server;
    server = null;
    for (const socket of sockets) socket.destroy();
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  };
  const port = await listen(0);
  return {
    port,
    cut: stop,
    restore: async () => {
      if (!server) await listen(port);
    },
    freeze: () => {
      frozen = true;
      for (const socket of sockets) socket.pause();
    },
    thaw: () => {
      frozen = false;
      // Held connections get their upstream (and a reader) before anything flows again.
      for (const client of waiting) if (!client.destroyed) connectUpstream(client);
      waiting = [];
      for (const socket of sockets) socket.resume();
    },
    close: stop,
  };
}
