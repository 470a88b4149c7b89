/**
 * What the webhook relay's test files share: a real HTTP receiver on 127.0.0.1 (random port) that
 * records every request and answers with `reply`, secrets, envelopes, and a `deliver` that checks
 * one outcome per message.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { expect } from 'vitest';
import { type DeliveryOutcome, type Envelope, type Ordering, type Relay } from 'outboxer';
import { deliverBatch, makeContext, makeEnvelope } from '../support/envelopes.js';

export interface Hit {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

export type Reply = (hit: Hit, res: ServerResponse) => void | Promise<void>;

export const noContent: Reply = (_hit, res) => void res.writeHead(204).end();

export class Receiver {
  readonly hits: Hit[] = [];
  reply: Reply = noContent;
  private server: Server;
  private readonly sockets = new Set<Socket>();
  port = 0;

  private constructor() {
    this.server = this.createServer();
  }

  static async start(): Promise<Receiver> {
    const receiver = new Receiver();
    await receiver.listen(0);
    return receiver;
  }

  url(path = '/hook'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** Headers of the requests, for the tests that look at one header. */
  header(name: string): string[] {
    return this.hits.map((hit) => String(hit.headers[name]));
  }

  private createServer(): Server {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const hit = {
          path: req.url ?? '',
          headers: req.headers,
          body: Buffer.concat(chunks).toString('utf8'),
        };
        this.hits.push(hit);
        Promise.resolve(this.reply(hit, res)).catch(() => res.destroy());
      });
    });
    server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    return server;
  }

  private async listen(port: number): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => resolve());
    });
    this.port = (this.server.address() as AddressInfo).port;
  }

  /** Connections clients still hold open. */
  openConnections(): number {
    return this.sockets.size;
  }

  /** Stops answering: the port refuses connections until {@link restart}. */
  async stop(): Promise<void> {
    const closed = new Promise((resolve) => this.server.close(resolve));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  /** Listens again on the same port. */
  async restart(): Promise<void> {
    this.server = this.createServer();
    await this.listen(this.port);
  }
}

export const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

export const envelope = (overrides: Partial<Envelope> = {}) =>
  makeEnvelope({ type: 'order.paid', groupKey: 'g1', payload: { n: 1 }, ...overrides });

/** Delivers `batch` and checks that the relay reported one outcome per message. */
export async function deliver(
  relay: Relay,
  batch: Envelope[],
  context: { ordering?: Ordering; signal?: AbortSignal } = {},
): Promise<DeliveryOutcome[]> {
  const outcomes = await deliverBatch(relay, batch, makeContext(context));
  expect(outcomes).toHaveLength(batch.length);
  return outcomes;
}

/** The error of a failed outcome. */
export function errorOf(outcome: DeliveryOutcome | undefined): Error {
  expect(outcome?.ok).toBe(false);
  return (outcome as { error: Error }).error;
}
