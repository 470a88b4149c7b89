/**
 * A small TCP proxy in this process, for outage tests against shared servers: the client under
 * test connects through it, and the test cuts it (what a server restart or a network failure looks
 * like to the client) and restores it, while the server itself, and every other client, goes on.
 * It forwards bytes untouched.
 */
import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

export interface TcpProxy {
  /** The port the proxy listens on, on 127.0.0.1 (the same after {@link restore}). */
  readonly port: number;
  /** Drops every open connection and stops listening: new connections are refused. */
  cut(): Promise<void>;
  /** Listens again on the same port (nothing happens when it already listens). */
  restore(): Promise<void>;
  /** Open connections stay open, but nothing more comes back from the target until {@link resume}. */
  stall(): void;
  resume(): void;
}

/**
 * Starts a proxy on a free port of 127.0.0.1 to `target` (a port on 127.0.0.1, or a host and port).
 * Its methods may be passed around unbound (`outage: { begin: proxy.cut, end: proxy.restore }`).
 * A test cuts it at the end: that closes everything it opened.
 *
 * @example
 * const proxy = await tcpProxy(6379);
 * const client = new Redis({ port: proxy.port });
 * await proxy.cut(); // Redis is down, for this client only
 * await proxy.restore();
 */
export async function tcpProxy(target: number | { host: string; port: number }): Promise<TcpProxy> {
  const { host, port: targetPort } =
    typeof target === 'number' ? { host: '127.0.0.1', port: target } : target;
  const sockets = new Set<Socket>();
  const upstreams = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;

  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  const restore = (): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      if (server !== undefined) return resolve();
      const listener = createServer((downstream) => {
        const upstream = connect(targetPort, host);
        track(downstream);
        track(upstream);
        upstreams.add(upstream);
        upstream.on('close', () => upstreams.delete(upstream));
        downstream.pipe(upstream).pipe(downstream);
        downstream.on('close', () => upstream.destroy());
        upstream.on('close', () => downstream.destroy());
      });
      listener.once('error', reject);
      listener.listen(port, '127.0.0.1', () => {
        port = (listener.address() as AddressInfo).port;
        server = listener;
        resolve();
      });
    });
  const cut = (): Promise<void> =>
    new Promise<void>((resolve) => {
      const current = server;
      server = undefined;
      for (const socket of sockets) socket.destroy();
      if (current === undefined) return resolve();
      current.close(() => resolve());
    });

  await restore();
  return {
    port,
    cut,
    restore,
    stall: () => upstreams.forEach((socket) => socket.pause()),
    resume: () => upstreams.forEach((socket) => socket.resume()),
  };
}

/** A port on 127.0.0.1 that nothing listens on: connections to it are refused. */
export async function closedPort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
