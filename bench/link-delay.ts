/**
 * A remote broker's round trip on loopback: a TCP proxy that holds every chunk for `delayMs` in
 * each direction before passing it on, in order. Both arms of a row go through it.
 */
import net from 'node:net';

export interface DelayedLink {
  /** The proxy's port on 127.0.0.1. */
  readonly port: number;
  close(): Promise<void>;
}

export async function delayedLink(
  target: { host: string; port: number },
  delayMs: number,
): Promise<DelayedLink> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target);
    for (const socket of [client, upstream]) {
      socket.setNoDelay(true);
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    // Timers of one duration fire in the order they were set: the bytes keep their order.
    const forward = (from: net.Socket, to: net.Socket) =>
      from.on('data', (chunk) => setTimeout(() => to.destroyed || to.write(chunk), delayMs));
    forward(client, upstream);
    forward(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
