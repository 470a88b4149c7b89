import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { DeliveryError, PermanentError, type DeliveryOutcome } from 'outboxer';
import { webhookRelay, type WebhookRelayOptions } from 'outboxer/webhook';
import { deliverBatch, makeEnvelope } from '../support/envelopes.js';

// What the relay's error says becomes the message's lastError, a log line and a span attribute:
// whatever a receiver echoes back must come out without the secrets the relay sent it.

type Reply = (headers: IncomingHttpHeaders, res: ServerResponse) => void;

/** A real HTTP receiver on 127.0.0.1 that answers every request with `reply`. */
class Receiver {
  reply: Reply = (_headers, res) => void res.writeHead(204).end();
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor() {
    this.server = createServer((req, res) => {
      req.resume();
      req.on('end', () => this.reply(req.headers, res));
    });
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  url(path = '/hook', userinfo = ''): string {
    return `http://${userinfo === '' ? '' : `${userinfo}@`}127.0.0.1:${this.port}${path}`;
  }

  /** Closes the server, and the connections of bodies that never finish. */
  async stop(): Promise<void> {
    const closed = new Promise((resolve) => this.server.close(resolve));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }
}

/** A secret that starts with `Sekr` (to spot any start of it) followed by random characters. */
const makeSecret = (middle = '') => `Sekr${middle}${randomBytes(24).toString('base64url')}`;

const jsonEscaped = (text: string) => JSON.stringify(text).slice(1, -1);

/** Fails when `text` holds the start of `secret` or any 6 characters of it, as is or JSON-escaped. */
function expectNoPieceOf(text: string, secret: string): void {
  expect(text).not.toContain('Sekr');
  for (const form of [secret, jsonEscaped(secret)]) {
    for (let i = 0; i + 6 <= form.length; i++) expect(text).not.toContain(form.slice(i, i + 6));
  }
}

/** The error of the single message's failed delivery: what becomes its lastError. */
async function errorOf(options: WebhookRelayOptions): Promise<Error> {
  const [outcome] = (await deliverBatch(webhookRelay({ timeout: 5000, ...options }), [
    makeEnvelope({ type: 'order.paid', payload: { n: 1 } }),
  ])) as DeliveryOutcome[];
  expect(outcome?.ok).toBe(false);
  return (outcome as { error: Error }).error;
}

describe('webhook error redaction', () => {
  // One receiver per test, on a port of its own: fetch keeps connections per origin, and one that a
  // test's stop() closed must not be the next test's.
  let receiver: Receiver;
  beforeEach(async () => {
    receiver = new Receiver();
    await receiver.start();
  });
  afterEach(() => receiver.stop());

  describe('a configured header value with " and \\ echoed back', () => {
    const apiKey = makeSecret('"q\\b"');
    const headers = { 'x-api-key': apiKey };

    for (const [status, kind] of [
      [400, PermanentError],
      [503, DeliveryError],
    ] as const) {
      test(`HTTP ${status}: as plain text, as JSON and in the status line`, async () => {
        for (const echo of [
          (key: string) => `bad key ${key} (plain)`,
          (key: string) => JSON.stringify({ error: 'bad key', key }),
        ]) {
          receiver.reply = (h, res) =>
            void res
              .writeHead(status, `Refused ${String(h['x-api-key'])}`, { 'retry-after': '1' })
              .end(echo(String(h['x-api-key'])));
          const error = await errorOf({ url: receiver.url(), headers });
          expect(error).toBeInstanceOf(kind);
          expect(error.message).toContain(`HTTP ${status} Refused ***`);
          expect(error.message).toContain('bad key');
          expectNoPieceOf(error.message, apiKey);
        }
      });
    }
  });

  describe('a secret straddling the 200-character cut of the body snippet', () => {
    for (const [name, secret] of [
      ['plain', makeSecret()],
      ['with " and \\', makeSecret('\\"x"\\')],
    ] as const) {
      test(`${name}: no piece of it at any offset around the cut`, async () => {
        let offset = 0;
        receiver.reply = (h, res) =>
          void res
            .writeHead(500)
            .end(`${'.'.repeat(offset)}${String(h['x-api-key'])} and more text after it`);
        for (offset = 180; offset <= 205; offset++) {
          const error = await errorOf({ url: receiver.url(), headers: { 'x-api-key': secret } });
          expect(error.message, `offset ${offset}`).toContain('HTTP 500');
          expectNoPieceOf(error.message, secret);
        }
      });
    }

    test('a body read that stops part-way through a secret does not show its start', async () => {
      const secret = makeSecret();
      let kept = 0;
      // The relay reads at most 4 KiB; whitespace collapses, so the end of that read shows.
      receiver.reply = (h, res) =>
        void res.writeHead(502).end(`${' '.repeat(4096 - kept)}${String(h['x-api-key'])}`);
      for (kept of [4, 5, 9, 16, 30]) {
        const error = await errorOf({ url: receiver.url(), headers: { 'x-api-key': secret } });
        expect(error.message, `${kept} characters`).toContain('HTTP 502');
        expectNoPieceOf(error.message, secret);
      }
    });

    test('a body that stalls part-way through a secret does not show its start', async () => {
      const secret = makeSecret();
      receiver.reply = (h, res) => {
        res.writeHead(500);
        res.write(`upstream said: ${String(h['x-api-key']).slice(0, 14)}`);
      };
      const error = await errorOf({ url: receiver.url(), headers: { 'x-api-key': secret }, timeout: 300 });
      expect(error.message).toContain('HTTP 500');
      expect(error.message).toContain('upstream said: ***');
      expectNoPieceOf(error.message, secret);
    });
  });

  describe('innocent words stay as they are', () => {
    test('user-agent and other header names survive a user name, query values and headers that look like them', async () => {
      const password = makeSecret();
      const queryToken = makeSecret();
      receiver.reply = (h, res) =>
        void res
          .writeHead(400)
          .end(
            `user-agent: ${String(h['user-agent'])}; accept: ${String(h.accept)}; content-type: ${String(h['content-type'])}; x-client: ${String(h['x-client'])}; agent user json`,
          );
      const error = await errorOf({
        url: receiver.url(`/hook?role=user&format=json&token=${queryToken}`, `user:${password}`),
        headers: { accept: 'application/json', 'x-client': 'agent' },
      });
      expect(error.message).toContain(
        'user-agent: outboxer-webhook; accept: application/json; content-type: application/json; x-client: agent; agent user json',
      );
      expect(error.message).not.toContain('***-agent');
      expectNoPieceOf(error.message, password);
      expectNoPieceOf(error.message, queryToken);
    });
  });

  describe('URL credentials', () => {
    test('a password with " and \\ echoed back decoded, as JSON and inside the Basic token', async () => {
      const password = makeSecret('"p\\w"');
      receiver.reply = (h, res) => {
        const basic = String(h.authorization);
        const decoded = Buffer.from(basic.slice('Basic '.length), 'base64').toString('utf8');
        res.writeHead(401).end(`${basic} ${decoded} ${JSON.stringify({ decoded })}`);
      };
      const error = await errorOf({ url: receiver.url('/hook', `alice:${encodeURIComponent(password)}`) });
      expect(error).toBeInstanceOf(PermanentError);
      expect(error.message).toContain('HTTP 401 Unauthorized');
      expectNoPieceOf(error.message, password);
      expect(error.message).not.toContain(Buffer.from(`alice:${password}`).toString('base64').slice(0, 12));
    });

    test('a token as the user name, echoed back cut at the snippet length', async () => {
      const token = makeSecret();
      receiver.reply = (h, res) => {
        const decoded = Buffer.from(String(h.authorization).slice('Basic '.length), 'base64').toString();
        res.writeHead(403).end(`${'-'.repeat(190)}${decoded}`);
      };
      const error = await errorOf({ url: receiver.url('/hook', token) });
      expect(error.message).toContain('HTTP 403 Forbidden');
      expectNoPieceOf(error.message, token);
    });
  });
});
