import { expect, test } from 'vitest';
import { callFailure, entryFailure, startFailure } from './sqs-errors.js';

const signal = new AbortController().signal;

test.each([
  [{ senderFault: true, code: 'InvalidMessageContents' }, 'PermanentError', true],
  [{ senderFault: false, code: 'InternalError' }, 'DeliveryError', false],
  [{ senderFault: true, code: 'RequestThrottled' }, 'DeliveryError', false],
  [{ senderFault: true, code: 'KmsAccessDenied' }, 'DeliveryError', false],
])('a Failed[] entry %o is a %s', (failed, name, permanent) => {
  const error = entryFailure({ id: '7', message: 'why', ...failed }, 7);
  expect({ name: error.name, permanent: error.permanent }).toEqual({ name, permanent });
  expect(error.message).toBe(`SQS rejected message 7: ${failed.code}: why`);
});

test('a call that threw is retryable, except one message refused as too long', () => {
  const tooLong = Object.assign(new Error('MessageTooLong'), { name: 'InvalidAttributeValue' });
  expect((callFailure(tooLong, 'q', 1, signal) as Error).name).toBe('PermanentError');
  expect((callFailure(tooLong, 'q', 3, signal) as Error).name).toBe('DeliveryError');
  const network = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
  expect(callFailure(network, 'q', 1, signal)).toMatchObject({ name: 'DeliveryError', permanent: false });
  const denied = Object.assign(new Error('not allowed'), {
    name: 'AccessDenied',
    $metadata: { httpStatusCode: 403 },
  });
  expect(callFailure(denied, 'q', 1, signal)).toMatchObject({
    code: 'RELAY_MISCONFIGURED',
    retryable: true,
    message: expect.stringContaining('sqs:SendMessage'),
  });
});

test('an aborted call reports the abort reason', () => {
  const controller = new AbortController();
  controller.abort(new Error('lease expired during delivery'));
  const aborted = Object.assign(new Error('Request aborted'), { name: 'AbortError' });
  expect(callFailure(aborted, 'q', 2, controller.signal)).toBe(controller.signal.reason);
});

test('at start, a missing queue or refused credentials are fatal; a passing failure is not', () => {
  const missing = Object.assign(new Error('The specified queue does not exist.'), {
    name: 'QueueDoesNotExist',
    Code: 'AWS.SimpleQueueService.NonExistentQueue',
  });
  expect(startFailure(missing, 'q')).toMatchObject({ code: 'RELAY_MISCONFIGURED', retryable: false });
  const token = Object.assign(new Error('The security token included in the request is invalid.'), {
    __type: 'com.amazon.coral.service#UnrecognizedClientException',
  });
  expect(startFailure(token, 'q')?.message).toMatch(/rejected the client's credentials/);
  const throttled = Object.assign(new Error('slow down'), { name: 'ThrottlingException', $fault: 'client' });
  expect(startFailure(throttled, 'q')).toBeUndefined();
  const unavailable = Object.assign(new Error('try later'), { name: 'ServiceUnavailable', $fault: 'server' });
  expect(startFailure(unavailable, 'q')).toBeUndefined();
  // A refused request that fits no known case is not retried forever in silence.
  const unknownAttribute = Object.assign(new Error('Unknown Attribute FifoQueue.'), {
    name: 'InvalidAttributeName',
    $fault: 'client',
  });
  expect(startFailure(unknownAttribute, 'q')).toMatchObject({
    code: 'RELAY_MISCONFIGURED',
    message: expect.stringContaining('SQS refused GetQueueAttributes on q'),
  });
});
