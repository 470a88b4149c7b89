import { functionRelay, OutboxerError, PermanentError, type Envelope } from 'outboxer';
import { relayContract, type Received } from './contract.js';

// The contract suite against the in-process function relay: the reference the broker relays match.
relayContract({
  name: 'function',
  keepsOrder: true,
  dedupesById: true,
  async destination() {
    const received: Received[] = [];
    let down = false;
    const relay = functionRelay(async (message: Envelope) => {
      if (down) throw new Error('destination down');
      received.push({
        id: message.id,
        groupKey: message.groupKey,
        payload: message.payload,
        dedupeId: String(message.id),
      });
    });
    return {
      relay,
      received: async () => received,
      outage: { begin: async () => void (down = true), end: async () => void (down = false) },
      teardown: async () => undefined,
    };
  },
  async misconfigured() {
    return {
      relay: functionRelay(async () => {
        throw new OutboxerError('RELAY_MISCONFIGURED', 'no such endpoint');
      }),
      error: /^RELAY_MISCONFIGURED: no such endpoint$/,
    };
  },
  async refusal() {
    return {
      relay: functionRelay(async (message: Envelope) => {
        if ((message.payload as { valid?: boolean }).valid === false)
          throw new PermanentError('invalid payload');
      }),
      message: { payload: { valid: false } },
      error: /^DELIVERY_FAILED: invalid payload$/,
    };
  },
});
