import { afterEach, describe, expect, test, vi } from 'vitest';
import { PollCursor } from './cursor.js';

describe('PollCursor', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  test('moves past what was handed out, never backwards, and watches the transactions then in flight', () => {
    const cursor = new PollCursor(60_000);
    expect(cursor.next()).toBe(0);
    cursor.advance(100, ['7']);
    cursor.advance(50, ['8']); // behind the cursor: ignored, and 8 is not watched
    expect(cursor.next()).toBe(100);
    expect(cursor.watch()).toEqual({ xids: ['7'], rewindTo: [0] });
    cursor.advance(200, ['7', '9']);
    // 7 keeps the lowest cursor it was seen at; 9 gets the one it was first seen at.
    expect(cursor.watch()).toEqual({ xids: ['7', '9'], rewindTo: [0, 100] });
  });

  test('a poll that started lower moves the cursor back and forgets the transactions it covered', () => {
    const cursor = new PollCursor(60_000);
    cursor.advance(100, ['7']);
    cursor.advance(200, ['9']);
    cursor.polled(100);
    expect(cursor.next()).toBe(100);
    expect(cursor.watch()).toEqual({ xids: ['7'], rewindTo: [0] });
    cursor.polled(150); // above the cursor: nothing moves
    expect(cursor.next()).toBe(100);
  });

  test('remembers the rewind count a poll reported, through restarts', () => {
    const cursor = new PollCursor(60_000);
    expect(cursor.rewindsSeen()).toBeUndefined();
    cursor.polled(0, 3);
    expect(cursor.rewindsSeen()).toBe(3);
    cursor.polled(0); // a poll that reported no count changes nothing
    cursor.restart();
    expect(cursor.rewindsSeen()).toBe(3);
  });

  test('rewind() only ever lowers the cursor; restart() goes to the beginning and clears the watch', () => {
    const cursor = new PollCursor(60_000);
    cursor.advance(100, ['7']);
    cursor.rewind(150);
    expect(cursor.next()).toBe(100);
    cursor.rewind(40);
    expect(cursor.next()).toBe(40);
    cursor.restart();
    expect(cursor.next()).toBe(0);
    expect(cursor.watch()).toEqual({ xids: [], rewindTo: [] });
  });

  test('restarts from the beginning once per interval', () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const cursor = new PollCursor(1_000);
    cursor.advance(100);
    vi.setSystemTime(1_000_999);
    expect(cursor.next()).toBe(100);
    vi.setSystemTime(1_001_000);
    expect(cursor.next()).toBe(0);
    cursor.advance(300);
    expect(cursor.next()).toBe(300);
  });

  test('a dialect that keeps no cursor polls from the beginning every time', () => {
    const cursor = new PollCursor(60_000, false);
    cursor.advance(100, ['7']);
    expect(cursor.next()).toBe(0);
    expect(cursor.watch()).toEqual({ xids: [], rewindTo: [] });
  });
});
