/**
 * Reading a request body whole, up to a limit, from a web stream (fetch) or a node request. The
 * signature covers the exact bytes, so the body is never decoded and encoded again on the way.
 */
import type { IncomingMessage } from 'node:http';

/** The body is over the limit: answered 413. */
export class TooLarge extends Error {}

/** Refuses at once a declared length over the limit, rather than reading the bytes first. */
function checkDeclared(contentLength: string | null | undefined, max: number): void {
  if (contentLength !== null && contentLength !== undefined && Number(contentLength) > max)
    throw new TooLarge();
}

/** A fetch request's body, at most `max` bytes. */
export async function readLimited(
  contentLength: string | null,
  body: ReadableStream<Uint8Array> | null,
  max: number,
): Promise<Uint8Array> {
  checkDeclared(contentLength, max);
  if (body === null) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel();
      throw new TooLarge();
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

/** A node request's body, at most `max` bytes. */
export function readNodeLimited(req: IncomingMessage, max: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    try {
      checkDeclared(req.headers['content-length'], max);
    } catch (error) {
      reject(error);
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > max) {
        req.off('data', onData);
        // Left unread, the rest is drained by node once the answer is sent.
        reject(new TooLarge());
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}
