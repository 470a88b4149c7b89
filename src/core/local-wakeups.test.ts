import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { LocalWakeUps } from './local-wakeups.js';

let wakes: Array<{ at: number; partition: number }>;
let wakeUps: LocalWakeUps;

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
  wakes = [];
  wakeUps = new LocalWakeUps((_outbox, partition) => wakes.push({ at: Date.now(), partition }));
});
afterEach(() => {
  wakeUps.clear();
  vi.useRealTimers();
});

function publishAt(at: number, ...partitions: number[]): void {
  vi.setSystemTime(at);
  wakeUps.published(partitions.map((partition) => ({ outbox: 'events', partition })));
}

/** Runs the timers up to `at`, publishing on the way as `publishes` says. */
function runUntil(at: number, publishes: Array<[number, ...number[]]> = []): void {
  for (const [when, ...partitions] of publishes) {
    vi.advanceTimersByTime(when - Date.now());
    publishAt(when, ...partitions);
  }
  vi.advanceTimersByTime(at - Date.now());
}

describe('LocalWakeUps', () => {
  test('wakes a partition 5, 40 and 250 ms after a publish, then stops', () => {
    runUntil(1000, [[0, 1]]);
    expect(wakes).toEqual([
      { at: 5, partition: 1 },
      { at: 40, partition: 1 },
      { at: 250, partition: 1 },
    ]);
  });

  test('publishes while the first wake-up is pending share it', () => {
    runUntil(1000, [
      [0, 1],
      [2, 1],
      [4, 1],
    ]);
    expect(wakes.map((w) => w.at)).toEqual([5, 40, 250]);
  });

  test('a publish after the first wake-up starts the series again: a wake-up 5 ms after every publish', () => {
    runUntil(1000, [
      [0, 1],
      [20, 1],
      [45, 1],
    ]);
    expect(wakes.map((w) => w.at)).toEqual([5, 25, 50, 85, 295]);
  });

  test('a writer faster than one publish every 5 ms gets one wake-up per 5 ms', () => {
    runUntil(
      1000,
      Array.from({ length: 30 }, (_, i): [number, number] => [i, 1]),
    );
    const during = wakes.filter((w) => w.at < 30).map((w) => w.at);
    expect(during).toEqual([5, 10, 15, 20, 25]);
    expect(wakes.filter((w) => w.at >= 30).map((w) => w.at)).toEqual([30, 65, 275]);
  });

  test('partitions have series of their own', () => {
    runUntil(1000, [
      [0, 1, 2],
      [10, 2],
    ]);
    expect(wakes).toEqual([
      { at: 5, partition: 1 },
      { at: 5, partition: 2 },
      { at: 15, partition: 2 },
      { at: 40, partition: 1 },
      { at: 50, partition: 2 },
      { at: 250, partition: 1 },
      { at: 260, partition: 2 },
    ]);
  });

  test('clear() cancels every pending wake-up', () => {
    publishAt(0, 1, 2);
    vi.advanceTimersByTime(10);
    wakeUps.clear();
    vi.advanceTimersByTime(1000);
    expect(wakes.map((w) => w.at)).toEqual([5, 5]);
  });
});
