import { expect, test } from 'vitest';
import type { PolledMessage } from '../dialect.js';
import { Status } from '../sql.js';
import { ReadyOnlyPolls } from './ready-only.js';

const ready = (id: number, blocked = false) => ({ id, status: Status.ready, blocked }) as PolledMessage;
const retry = (id: number) => ({ id, status: Status.retry, blocked: false }) as PolledMessage;

test('tried after a clean full poll and while ready-only polls return rows', () => {
  const polls = new ReadyOnlyPolls(true);
  expect(polls.next()).toBe(false); // nothing known yet: poll in full
  polls.polled(false, [ready(1), ready(2)]);
  expect(polls.next()).toBe(true);
  polls.polled(true, [ready(3)]);
  expect(polls.next()).toBe(true);
});

test('not after a full poll that found a due retry or a blocked row, nor after an empty one', () => {
  const polls = new ReadyOnlyPolls(true);
  polls.polled(false, [retry(1), ready(2)]);
  expect(polls.next()).toBe(false);
  polls.polled(false, [ready(2, true), ready(3)]);
  expect(polls.next()).toBe(false);
  polls.polled(false, []);
  expect(polls.next()).toBe(false);
});

test('after an empty ready-only poll, eight full polls pass before a clean one makes it worth trying again', () => {
  const polls = new ReadyOnlyPolls(true);
  polls.polled(false, [ready(1)]);
  polls.polled(true, []);
  for (let i = 0; i < 8; i++) {
    expect(polls.next()).toBe(false);
    polls.polled(false, [ready(10 + i)]);
  }
  expect(polls.next()).toBe(false);
  polls.polled(false, [ready(20)]);
  expect(polls.next()).toBe(true);
});

test('never where the dialect does not take them', () => {
  const polls = new ReadyOnlyPolls(false);
  polls.polled(false, [ready(1)]);
  expect(polls.next()).toBe(false);
});
