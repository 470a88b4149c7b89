import { describe, expect, test } from 'vitest';
import { DeliveryError } from '../../core/errors.js';
import type { KafkaClientAdapter, KafkaRecord } from './kafka-client.js';
import { SendLane, type Contribution } from './kafka-lane.js';

/**
 * A client that records each request (as record values), holds its first until `open()` (unless
 * `holdsFirst: false`), and fails as many requests as `failNext` says.
 */
function client(partitionsPerSend: number, options: { resets?: boolean; holdsFirst?: boolean } = {}) {
  const requests: string[][] = [];
  const events: string[] = [];
  let release: (() => void) | undefined;
  let failures = 0;
  const adapter: KafkaClientAdapter = {
    client: 'test',
    producer: {},
    partitionsPerSend,
    connect: async () => undefined,
    partitionCount: async () => 4,
    async send(records) {
      const values = records.map((r) => r.value.toString());
      requests.push(values);
      events.push(`send ${values.join(',')}`);
      // The first request waits until `open()`: the contributions queued meanwhile wait behind it.
      if (requests.length === 1 && options.holdsFirst !== false)
        await new Promise<void>((resolve) => (release = resolve));
      if (failures > 0) {
        failures -= 1;
        throw new Error('refused');
      }
    },
    ...(options.resets ? { resetIdempotence: async () => void events.push('reset') } : {}),
  };
  return {
    adapter,
    requests,
    events,
    open: () => release?.(),
    failNext: (n: number) => (failures = n),
  };
}

function record(value: string, partition: number, topic = 't'): KafkaRecord {
  return { topic, partition, key: null, value: Buffer.from(value), headers: {} };
}

function contribution(
  adapter: KafkaClientAdapter,
  records: KafkaRecord[],
  options: Partial<Pick<Contribution, 'bytes' | 'maxBytes' | 'shareable'>> & {
    withdrawn?: () => boolean;
  } = {},
): Contribution {
  return {
    adapter,
    records,
    partitions: new Set(records.map((r) => `${r.topic}:${r.partition}`)),
    bytes: options.bytes ?? 100,
    maxBytes: options.maxBytes ?? 1_000_000,
    shareable: options.shareable ?? true,
    withdrawn: options.withdrawn ?? (() => false),
    started: false,
  };
}

/** Queues a first send that holds the lane, then `rest` behind it; returns every result. */
async function behindFirst(
  lane: SendLane,
  c: ReturnType<typeof client>,
  rest: Contribution[],
): Promise<Array<boolean | string>> {
  const first = lane.submit(contribution(c.adapter, [record('first', 0)]));
  await new Promise((resolve) => setImmediate(resolve));
  const results = [first, ...rest.map((r) => lane.submit(r))].map((p) =>
    p.then(
      (sent) => sent,
      (error: unknown) => `failed: ${(error as Error).message}`,
    ),
  );
  c.open();
  return Promise.all(results);
}

describe('the send lane', () => {
  test('one request at a time; those waiting go out together, each topic-partition in queue order', async () => {
    const c = client(1);
    const lane = new SendLane();
    const results = await behindFirst(lane, c, [
      contribution(c.adapter, [record('a1', 0)]),
      contribution(c.adapter, [record('b1', 1)]),
      contribution(c.adapter, [record('a2', 0)]),
      contribution(c.adapter, [record('b2', 1)]),
    ]);
    expect(results).toEqual([true, true, true, true, true]);
    // kafkajs: one topic-partition per request, so partition 0's waiting sends, then partition 1's.
    expect(c.requests).toEqual([['first'], ['a1', 'a2'], ['b1', 'b2']]);
  });

  test('a client that takes many partitions a request gets every waiting send in one', async () => {
    const c = client(Number.POSITIVE_INFINITY);
    const lane = new SendLane();
    await behindFirst(lane, c, [
      contribution(c.adapter, [record('a1', 0), record('b1', 1)]),
      contribution(c.adapter, [record('c1', 2)]),
      contribution(c.adapter, [record('a2', 0)]),
    ]);
    expect(c.requests).toEqual([['first'], ['a1', 'b1', 'c1', 'a2']]);
  });

  test('a send passed over holds back the later sends of its topic-partitions', async () => {
    const c = client(2);
    const lane = new SendLane();
    await behindFirst(lane, c, [
      contribution(c.adapter, [record('a1', 0)]),
      contribution(c.adapter, [record('b1', 1)]),
      // Would make three partitions: passed over, and with it partition 2's later send.
      contribution(c.adapter, [record('c1', 2)]),
      contribution(c.adapter, [record('c2', 2)]),
      contribution(c.adapter, [record('a2', 0)]),
    ]);
    expect(c.requests).toEqual([['first'], ['a1', 'b1', 'a2'], ['c1', 'c2']]);
  });

  test('no request grows past the smallest maxBytes of its sends', async () => {
    const c = client(1);
    const lane = new SendLane();
    await behindFirst(lane, c, [
      contribution(c.adapter, [record('a1', 0)], { bytes: 600, maxBytes: 1000 }),
      contribution(c.adapter, [record('a2', 0)], { bytes: 300, maxBytes: 2000 }),
      contribution(c.adapter, [record('a3', 0)], { bytes: 300, maxBytes: 2000 }),
      contribution(c.adapter, [record('a4', 0)], { bytes: 100, maxBytes: 2000 }),
    ]);
    // a3 would pass 1000 bytes; a4 fits by size but may not overtake a3 in partition 0.
    expect(c.requests).toEqual([['first'], ['a1', 'a2'], ['a3', 'a4']]);
  });

  test('a send that must go alone does, and so do sends of another adapter', async () => {
    const c = client(1);
    const other = client(1, { holdsFirst: false });
    const lane = new SendLane();
    await behindFirst(lane, c, [
      contribution(c.adapter, [record('a1', 0)], { shareable: false }),
      contribution(c.adapter, [record('a2', 0)]),
      contribution(other.adapter, [record('o1', 1)]),
      contribution(c.adapter, [record('b1', 1)]),
    ]);
    expect(c.requests).toEqual([['first'], ['a1'], ['a2'], ['b1']]);
    expect(other.requests).toEqual([['o1']]);
  });

  test('a withdrawn send is left out unsent; a failed request fails every send it carried', async () => {
    const c = client(1);
    const lane = new SendLane();
    let halted = false;
    const results = behindFirst(lane, c, [
      contribution(c.adapter, [record('a1', 0)]),
      contribution(c.adapter, [record('a2', 0)], { withdrawn: () => halted }),
      contribution(c.adapter, [record('a3', 0)]),
    ]);
    halted = true;
    c.failNext(2);
    expect(await results).toEqual(['failed: refused', 'failed: refused', false, 'failed: refused']);
    expect(c.requests).toEqual([['first'], ['a1', 'a3']]);
  });

  test('a failure reaches the relays before the next request is formed, so their other sends can withdraw', async () => {
    const c = client(1);
    const lane = new SendLane();
    let halted = false;
    const batch = [record('a1', 0), record('b1', 1)].map((r) =>
      contribution(c.adapter, [r], { withdrawn: () => halted }),
    );
    c.failNext(2);
    const first = lane.submit(contribution(c.adapter, [record('first', 0)]));
    await new Promise((resolve) => setImmediate(resolve));
    // As a relay hears of a failure: a few promise steps after the lane's rejection.
    const results = batch.map((b) =>
      lane.submit(b).then(
        (sent) => sent,
        async (error: unknown) => {
          await Promise.resolve();
          await Promise.resolve();
          halted = true;
          return `failed: ${(error as Error).message}`;
        },
      ),
    );
    c.open();
    await expect(first).rejects.toThrow('refused');
    expect(await Promise.all(results)).toEqual(['failed: refused', false]);
    expect(c.requests).toEqual([['first'], ['a1']]);
  });

  test('after a failed request, a client that can starts a new idempotent session before the next', async () => {
    const c = client(1, { resets: true });
    const lane = new SendLane();
    c.failNext(1);
    const results = await behindFirst(lane, c, [contribution(c.adapter, [record('a1', 0)])]);
    expect(results).toEqual(['failed: refused', true]);
    expect(c.events).toEqual(['send first', 'reset', 'send a1']);
    expect(lane.needsReset).toBe(false);
  });

  test('a failed reset fails the send it preceded with a DeliveryError, and is tried again next time', async () => {
    const c = client(1, { resets: true });
    let resets = 0;
    c.adapter.resetIdempotence = async () => {
      resets += 1;
      if (resets === 1) throw new Error('no broker');
    };
    const lane = new SendLane();
    c.failNext(1);
    const first = lane.submit(contribution(c.adapter, [record('first', 0)]));
    await new Promise((resolve) => setImmediate(resolve));
    c.open();
    await expect(first).rejects.toThrow('refused');
    const second = lane.submit(contribution(c.adapter, [record('a1', 0)]));
    await expect(second).rejects.toThrow(DeliveryError);
    await expect(second).rejects.toThrow(/new idempotent test producer session.*no broker/);
    await expect(lane.submit(contribution(c.adapter, [record('a2', 0)]))).resolves.toBe(true);
    expect(c.requests).toEqual([['first'], ['a2']]);
  });

  test('idle() waits for every send queued so far', async () => {
    const c = client(1);
    const lane = new SendLane();
    await expect(lane.idle()).resolves.toBeUndefined();
    const sent = lane.submit(contribution(c.adapter, [record('first', 0)]));
    let idle = false;
    void lane.idle().then(() => (idle = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(idle).toBe(false);
    c.open();
    await sent;
    await lane.idle();
    expect(idle).toBe(true);
  });
});
