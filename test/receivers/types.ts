/**
 * Compile-time checks, run by `tsc --noEmit -p .` (this file is never executed): a receiver takes
 * either a `handler` or `store: true`, never both and never neither, and a handler written inline
 * gets its message and transaction types from the options. Each `@ts-expect-error` fails the
 * typecheck if the line below it ever compiles.
 */
import type pg from 'pg';
import { expectTypeOf } from 'expect-type';
import type { Outboxer, ReceivedMessage } from 'outboxer';
import { kafkajsReceiver } from 'outboxer/kafka';
import { natsReceiver, type JetStreamMessageLike } from 'outboxer/nats';
import type { PgTransactionClient } from 'outboxer/pg';
import { webhookReceiver } from 'outboxer/webhook';

declare const outboxer: Outboxer<PgTransactionClient>;
declare const transaction: <T>(work: (tx: pg.PoolClient) => Promise<T>) => Promise<T>;
const common = { outboxer, inbox: 'shipping', transaction };

export function handlerOrStore() {
  natsReceiver({
    ...common,
    nakDelay: 100,
    handler: (message, tx) => {
      expectTypeOf(message).toEqualTypeOf<ReceivedMessage<JetStreamMessageLike>>();
      expectTypeOf(tx).toEqualTypeOf<pg.PoolClient>();
    },
  });
  natsReceiver({ ...common, store: true, nakDelay: 100 });
  natsReceiver({ ...common, store: false, handler: () => undefined });
  // @ts-expect-error neither a handler nor store: true
  natsReceiver({ ...common, nakDelay: 100 });
  // @ts-expect-error a handler with store: true (the inbox's process.handler processes)
  natsReceiver({ ...common, store: true, handler: () => undefined });
  // @ts-expect-error store: false needs a handler
  natsReceiver({ ...common, store: false });

  kafkajsReceiver({ ...common, store: true });
  kafkajsReceiver({
    ...common,
    handler: (message) => expectTypeOf(message.partition).toEqualTypeOf<number>(),
  });
  // @ts-expect-error neither a handler nor store: true
  kafkajsReceiver(common);

  webhookReceiver({ ...common, secret: 'whsec_x', store: true });
  // @ts-expect-error neither a handler nor store: true
  webhookReceiver({ ...common, secret: 'whsec_x' });
}
