/**
 * The chaos run's operator: decides about the dead messages of the outboxes that park them, as a
 * person on call would, while relays drain and faults play: a poison message is discarded (the
 * messages its group held go out after it, in order), any other is revived with retryDead. It runs
 * until the outbox has drained, since a parked group holds its later messages until then.
 */
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { Outboxer } from 'outboxer';
import {
  INSTANCE_NAME,
  OPERATOR_LOG,
  outboxOptions,
  type ChaosPayload,
  type OperatorAction,
} from './config.js';
import { random, sleep } from './random.js';
import type { RunContext } from './run-context.js';

/** Starts the operator; `stop()` ends it after its current round. */
export function startOperator(ctx: RunContext): { stop(): Promise<void> } {
  const operatorRandom = random(ctx.settings.seed + 1);
  let operating = true;

  async function operate(): Promise<void> {
    const { database } = ctx.servers;
    const { appUrl, modes } = ctx.prepared;
    const parking = modes.filter((m) => m.onDead === 'park');
    if (parking.length === 0) return;
    // A connection cut by a fault is replaced by the pool: the next call reconnects.
    const pool = database.pool(appUrl, { max: 2, name: 'operator' });
    const operator = new Outboxer({
      database: pool.adapter,
      name: INSTANCE_NAME,
      relay: false,
      outboxes: Object.fromEntries(parking.map((m) => [m.name, outboxOptions(m)])),
    });
    try {
      while (operating) {
        await sleep(operatorRandom.int(300, 1500));
        for (const mode of parking) {
          try {
            for (const message of await operator.listDead(mode.name, { limit: 100 })) {
              const poison = (message.payload as ChaosPayload).poison === true;
              const done = poison
                ? await operator.discard(mode.name, [message.id])
                : await operator.retryDead(mode.name, { ids: [message.id] });
              if (done === 0) continue;
              const action: OperatorAction = {
                action: poison ? 'discard' : 'retry',
                outbox: mode.name,
                id: message.id,
                at: Date.now(),
              };
              appendFileSync(join(ctx.settings.runDir, OPERATOR_LOG), JSON.stringify(action) + '\n');
            }
          } catch {
            // The database is down, restarting or frozen: decide at the next round.
          }
        }
      }
    } finally {
      await pool.end().catch(() => undefined);
    }
  }

  const operating$ = operate();
  return {
    async stop() {
      operating = false;
      await operating$;
    },
  };
}
