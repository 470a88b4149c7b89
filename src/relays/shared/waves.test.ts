import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { DeliveryError } from '../../core/errors.js';
import type { Ordering } from '../../core/options.js';
import { deliverEach, SKIPPED, type DeliveryOutcome, type Envelope } from '../../core/relay.js';
import { makeContext, makeEnvelope } from '../../../test/support/envelopes.js';
import { deliverInWaves, type SendWave, type WaveOptions } from './waves.js';

const batchOf = (keys: ReadonlyArray<string | null>): Envelope[] =>
  keys.map((groupKey, i) => makeEnvelope({ id: i + 1, groupKey }));

/** A destination that records each wave (by id) and fails the ids in `failing`. */
function destination(failing: ReadonlySet<number> = new Set()) {
  const waves: number[][] = [];
  const send: SendWave = async (wave) => {
    waves.push(wave.map((m) => m.id));
    return wave.map((m) =>
      failing.has(m.id) ? { ok: false, error: new Error(`refused ${m.id}`) } : { ok: true },
    );
  };
  return { waves, send };
}

const kind = (outcome: DeliveryOutcome) =>
  outcome.ok ? 'ok' : outcome.error === SKIPPED ? 'skipped' : 'failed';

async function run(
  keys: ReadonlyArray<string | null>,
  {
    ordering = 'group',
    failing = [],
    ...options
  }: WaveOptions & { ordering?: Ordering; failing?: number[] } = {},
) {
  const { waves, send } = destination(new Set(failing));
  const outcomes = await deliverInWaves(batchOf(keys), makeContext({ ordering }), send, options);
  return { waves, outcomes: outcomes.map(kind) };
}

describe('deliverInWaves', () => {
  test("'group': wave n holds the n-th message of every group key; unordered messages all go in the first", async () => {
    const { waves, outcomes } = await run(['a', 'a', null, 'b', 'a', null]);
    expect(waves).toEqual([[1, 3, 4, 6], [2], [5]]);
    expect(outcomes).toEqual(['ok', 'ok', 'ok', 'ok', 'ok', 'ok']);
  });

  test("'total': one key for the whole outbox, so one message per wave, in id order", async () => {
    const { waves } = await run(['a', null, 'b'], { ordering: 'total' });
    expect(waves).toEqual([[1], [2], [3]]);
  });

  test("'none': no key, so the whole batch in one wave", async () => {
    const { waves } = await run(['a', 'a', 'b'], { ordering: 'none' });
    expect(waves).toEqual([[1, 2, 3]]);
  });

  test('a failed message stops its group: the later ones are SKIPPED and never sent; other groups go on', async () => {
    const { waves, outcomes } = await run(['a', 'b', 'a', 'b', 'a', null], { failing: [1] });
    expect(waves).toEqual([[1, 2, 6], [4]]);
    expect(outcomes).toEqual(['failed', 'ok', 'skipped', 'ok', 'skipped', 'ok']);
  });

  test('a failed unordered message holds up nothing', async () => {
    const { outcomes } = await run([null, null, 'a'], { failing: [1] });
    expect(outcomes).toEqual(['failed', 'ok', 'ok']);
  });

  test('perKey: Infinity sends the batch in one wave; what follows a failure of its group is SKIPPED although sent', async () => {
    const { waves, outcomes } = await run(['a', 'a', 'b', 'a'], { perKey: Infinity, failing: [2] });
    expect(waves).toEqual([[1, 2, 3, 4]]);
    expect(outcomes).toEqual(['ok', 'failed', 'ok', 'skipped']);
  });

  test('perKey: 2 puts two messages of a key in a wave', async () => {
    const { waves } = await run(['a', 'a', 'a', 'b'], { perKey: 2 });
    expect(waves).toEqual([[1, 2, 4], [3]]);
  });

  test('a wave that throws fails all its messages, with the error', async () => {
    const error = new Error('connection lost');
    let calls = 0;
    const send: SendWave = async () => {
      calls += 1;
      throw error;
    };
    const outcomes = await deliverInWaves(batchOf(['a', 'a', null]), makeContext(), send);
    expect(outcomes).toEqual([
      { ok: false, error },
      { ok: false, error: SKIPPED },
      { ok: false, error },
    ]);
    expect(calls).toBe(1);
  });

  test('a wave answered with the wrong number of outcomes fails as a whole', async () => {
    const outcomes = await deliverInWaves(batchOf(['a', 'b']), makeContext(), async () => [{ ok: true }]);
    expect(outcomes.map((o) => !o.ok && o.error instanceof DeliveryError)).toEqual([true, true]);
  });

  test('an empty batch sends nothing', async () => {
    const { waves, outcomes } = await run([]);
    expect({ waves, outcomes }).toEqual({ waves: [], outcomes: [] });
  });

  describe('when the signal fires', () => {
    const abortAfterFirstWave = (options: WaveOptions = {}) => {
      const controller = new AbortController();
      const waves: number[][] = [];
      const send: SendWave = async (wave) => {
        waves.push(wave.map((m) => m.id));
        controller.abort(new Error('stopping'));
        return wave.map(() => ({ ok: true }));
      };
      const outcomes = deliverInWaves(
        batchOf(['a', 'a', 'b', 'b']),
        makeContext({ signal: controller.signal }),
        send,
        options,
      );
      return { waves, outcomes };
    };

    test('nothing more is sent; what was not sent is SKIPPED (no attempt counted)', async () => {
      const { waves, outcomes } = abortAfterFirstWave();
      expect(await outcomes).toEqual([
        { ok: true },
        { ok: false, error: SKIPPED },
        { ok: true },
        { ok: false, error: SKIPPED },
      ]);
      expect(waves).toEqual([[1, 3]]);
    });

    test("with abandoned: 'failed', what was not sent fails with the signal's reason", async () => {
      const { outcomes } = abortAfterFirstWave({ abandoned: 'failed' });
      const [, second, , fourth] = await outcomes;
      expect([second, fourth]).toEqual([
        { ok: false, error: new Error('stopping') },
        { ok: false, error: new Error('stopping') },
      ]);
    });

    test('an already aborted signal sends nothing', async () => {
      const controller = new AbortController();
      controller.abort(new Error('stopping'));
      const { waves, send } = destination();
      const outcomes = await deliverInWaves(
        batchOf(['a', null]),
        makeContext({ signal: controller.signal }),
        send,
      );
      expect(outcomes.map(kind)).toEqual(['skipped', 'skipped']);
      expect(waves).toEqual([]);
    });
  });

  test('one wave at a time: the next one starts only after the previous one was answered', async () => {
    let inFlight = 0;
    let peak = 0;
    const send: SendWave = async (wave) => {
      peak = Math.max(peak, ++inFlight);
      await new Promise((resolve) => setTimeout(resolve, 5));
      inFlight -= 1;
      return wave.map(() => ({ ok: true }));
    };
    await deliverInWaves(batchOf(['a', 'a', 'a', 'b', 'b']), makeContext(), send);
    expect(peak).toBe(1);
  });

  test('perKey 1 reports what deliverEach would, and never sends two messages of a key in one wave', async () => {
    const specs = fc.array(
      fc.record({
        key: fc.option(fc.constantFrom('a', 'b', 'c'), { nil: null, freq: 4 }),
        fails: fc.boolean(),
      }),
      { maxLength: 30 },
    );
    await fc.assert(
      fc.asyncProperty(specs, fc.constantFrom<Ordering>('group', 'total', 'none'), async (list, ordering) => {
        const batch = batchOf(list.map((spec) => spec.key));
        const failing = new Set(batch.filter((_, i) => list[i]!.fails).map((m) => m.id));
        const { waves, send } = destination(failing);
        const context = makeContext({ ordering });
        const outcomes = await deliverInWaves(batch, context, send);
        const expected = await deliverEach(batch, context, async (m) => {
          if (failing.has(m.id)) throw new Error(`refused ${m.id}`);
        });
        expect(outcomes.map(kind)).toEqual(expected.map(kind));
        const keyOf = (id: number) =>
          ordering === 'none' ? null : ordering === 'total' ? '' : list[id - 1]!.key;
        for (const wave of waves) {
          const keys = wave.map(keyOf).filter((key) => key !== null);
          expect(new Set(keys).size).toBe(keys.length);
        }
        // Each message sent at most once, the skipped ones never.
        const sent = waves.flat();
        expect(new Set(sent).size).toBe(sent.length);
        expect(sent.sort((x, y) => x - y)).toEqual(
          batch.filter((_, i) => kind(outcomes[i]!) !== 'skipped').map((m) => m.id),
        );
      }),
      { numRuns: 200 },
    );
  });
});
