/**
 * The Postgres half of the suite's statement log: a TCP proxy in front of the test database that
 * reads the frontend protocol of every connection through it and logs each statement executed, a
 * simple `Query` with its text, an extended-protocol `Bind` with the text its statement was parsed
 * from and the values bound to it (text format; binary shown as hex). Whatever the client library,
 * this is what the server was asked to run.
 */
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { DATABASE_URL } from '../support/databases.js';

/** A statement as the database received it: its text, and the values bound to it (text format). */
export interface LoggedStatement {
  readonly text: string;
  readonly values: readonly unknown[];
}

export interface WireLog {
  readonly port: number;
  /** Executed statements: every `Query`, and every `Bind` with the text its statement was parsed from. */
  readonly statements: LoggedStatement[];
  /** Connections opened through the proxy so far. */
  readonly connections: () => number;
  /** A postgres:// URL through the proxy, with `search_path` set to `schema`. */
  url(schema: string): string;
  close(): Promise<void>;
}

function cstring(body: Buffer, offset: number): [string, number] {
  const end = body.indexOf(0, offset);
  return [body.toString('utf8', offset, end), end + 1];
}

/** Reads one connection's client-to-server bytes and logs the statements they execute. */
function frontendReader(log: LoggedStatement[]): (chunk: Buffer) => void {
  let pending = Buffer.alloc(0);
  let startup = true;
  const prepared = new Map<string, string>();
  return (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    for (;;) {
      if (startup) {
        // StartupMessage, SSLRequest, GSSENCRequest: length, then a code; no type byte.
        if (pending.length < 8 || pending.length < pending.readInt32BE(0)) return;
        const length = pending.readInt32BE(0);
        if (pending.readInt32BE(4) >>> 16 === 3) startup = false;
        pending = pending.subarray(length);
        continue;
      }
      if (pending.length < 5 || pending.length < 1 + pending.readInt32BE(1)) return;
      const type = String.fromCharCode(pending[0]!);
      const body = pending.subarray(5, 1 + pending.readInt32BE(1));
      pending = pending.subarray(1 + pending.readInt32BE(1));
      if (type === 'Q') {
        log.push({ text: cstring(body, 0)[0], values: [] });
      } else if (type === 'P') {
        const [name, next] = cstring(body, 0);
        prepared.set(name, cstring(body, next)[0]);
      } else if (type === 'B') {
        const [, afterPortal] = cstring(body, 0);
        const [statement, afterStatement] = cstring(body, afterPortal);
        let at = afterStatement;
        const formats = Array.from({ length: body.readInt16BE(at) }, (_, i) =>
          body.readInt16BE(at + 2 + i * 2),
        );
        at += 2 + formats.length * 2;
        const values: unknown[] = [];
        const count = body.readInt16BE(at);
        at += 2;
        for (let i = 0; i < count; i += 1) {
          const length = body.readInt32BE(at);
          at += 4;
          if (length < 0) {
            values.push(null);
            continue;
          }
          const binary = (formats.length === 1 ? formats[0] : formats[i]) === 1;
          const raw = body.subarray(at, at + length);
          values.push(binary ? `\\x${raw.toString('hex')}` : raw.toString('utf8'));
          at += length;
        }
        log.push({ text: prepared.get(statement) ?? `<unknown statement ${statement}>`, values });
      }
    }
  };
}

/** Starts a logging proxy in front of the test database's server. */
export async function wireLog(): Promise<WireLog> {
  const target = new URL(DATABASE_URL);
  const statements: LoggedStatement[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const server: Server = createServer((client) => {
    connections += 1;
    const server = connect(Number(target.port || 5432), target.hostname);
    const read = frontendReader(statements);
    for (const socket of [client, server]) {
      sockets.add(socket);
      socket.on('error', () => socket.destroy());
      socket.on('close', () => sockets.delete(socket));
    }
    client.on('data', (chunk: Buffer) => {
      read(chunk);
      server.write(chunk);
    });
    server.pipe(client);
    client.on('close', () => server.destroy());
    server.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    statements,
    connections: () => connections,
    url(schema) {
      const url = new URL(DATABASE_URL);
      url.host = `127.0.0.1:${port}`;
      url.searchParams.set('options', `-c search_path=${schema}`);
      return url.href;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
