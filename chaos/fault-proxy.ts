/**
 * A TCP proxy that injects network faults between a client and a server on this machine:
 *
 * - `up`: forwards bytes as they come;
 * - `down`: cuts every open connection (the client sees a reset) and refuses new ones at once;
 * - `slow`: delays every chunk, in both directions, by `delayMs` (order kept);
 * - `blackhole`: keeps connections open and accepts new ones, but forwards nothing: a server
 *   that hangs, or a network partition that drops packets without a reset.
 *
 * Only ever listens on and connects to 127.0.0.1.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';

export type ProxyMode = 'up' | 'down' | 'slow' | 'blackhole';

interface Pipe {
  client: Socket;
  server: Socket;
  flush(): void;
}

export class FaultProxy {
  private server: Server | undefined;
  private readonly pipes = new Set<Pipe>();
  mode: ProxyMode = 'up';
  delayMs = 0;
  port = 0;
  /** Connections accepted so far, and cut by `down`. */
  readonly stats = { accepted: 0, cut: 0 };

  constructor(
    private readonly targetPort: number,
    private readonly targetHost = '127.0.0.1',
  ) {}

  async listen(port = 0): Promise<number> {
    const server = createServer((client) => this.accept(client));
    server.on('error', () => undefined);
    this.server = server;
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    const address = server.address();
    this.port = typeof address === 'object' && address !== null ? address.port : 0;
    return this.port;
  }

  set(mode: ProxyMode, delayMs = 0): void {
    this.mode = mode;
    this.delayMs = mode === 'slow' ? delayMs : 0;
    if (mode === 'down') {
      for (const pipe of this.pipes) {
        this.stats.cut += 1;
        pipe.client.resetAndDestroy();
        pipe.server.destroy();
      }
      this.pipes.clear();
    }
    if (mode === 'up' || mode === 'slow') for (const pipe of this.pipes) pipe.flush();
  }

  private accept(client: Socket): void {
    if (this.mode === 'down') {
      client.resetAndDestroy();
      return;
    }
    this.stats.accepted += 1;
    const server = createConnection({ host: this.targetHost, port: this.targetPort });
    client.setNoDelay(true);
    server.setNoDelay(true);
    const toServer = this.link(client, server);
    const toClient = this.link(server, client);
    const pipe: Pipe = {
      client,
      server,
      flush: () => {
        toServer();
        toClient();
      },
    };
    this.pipes.add(pipe);
    const close = (): void => {
      this.pipes.delete(pipe);
      client.destroy();
      server.destroy();
    };
    client.on('error', close).on('close', close);
    server.on('error', close).on('close', close);
  }

  /** Forwards `from` to `to` through a queue that honours the current mode; returns a flusher. */
  private link(from: Socket, to: Socket): () => void {
    const queue: Array<{ chunk: Buffer; at: number }> = [];
    let timer: NodeJS.Timeout | undefined;
    const pump = (): void => {
      timer = undefined;
      while (queue.length > 0) {
        if (this.mode === 'blackhole' || this.mode === 'down') return;
        const head = queue[0]!;
        const wait = head.at - Date.now();
        if (wait > 0) {
          timer = setTimeout(pump, wait);
          return;
        }
        queue.shift();
        if (!to.destroyed) to.write(head.chunk);
      }
    };
    from.on('data', (chunk: Buffer) => {
      queue.push({ chunk, at: Date.now() + this.delayMs });
      if (timer === undefined) pump();
    });
    return () => {
      if (timer === undefined) pump();
    };
  }

  async close(): Promise<void> {
    for (const pipe of this.pipes) {
      pipe.client.destroy();
      pipe.server.destroy();
    }
    this.pipes.clear();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
