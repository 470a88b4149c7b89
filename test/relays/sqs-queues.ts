/**
 * What the SQS relay's test files share: a client of ElasticMQ (scripts/services/sqs.sh), queues
 * made for a test file and deleted after it, reading a queue empty, envelopes, and relays started
 * with recorded SendMessageBatch inputs.
 */
import * as sqs from '@aws-sdk/client-sqs';
import { SKIPPED, type DeliveryOutcome, type Envelope, type Relay } from 'outboxer';
import { sqsRelay, type SqsCommands, type SqsRelayOptions } from 'outboxer/sqs';
import { makeEnvelope } from '../support/envelopes.js';

export const ENDPOINT = 'http://127.0.0.1:9324';
export const client = new sqs.SQSClient({
  endpoint: ENDPOINT,
  region: 'us-east-1',
  credentials: { accessKeyId: 'outboxer', secretAccessKey: 'outboxer' },
});
const queues: string[] = [];

/** Deletes the queues the file created and closes the client: every test file's afterAll. */
export async function deleteQueues(): Promise<void> {
  for (const queueUrl of queues)
    await client.send(new sqs.DeleteQueueCommand({ QueueUrl: queueUrl })).catch(() => undefined);
  client.destroy();
}

export async function createQueue(fifo: boolean): Promise<string> {
  const name = `outboxer-focus-${Math.random().toString(36).slice(2, 10)}${fifo ? '.fifo' : ''}`;
  const { QueueUrl } = await client.send(
    new sqs.CreateQueueCommand({ QueueName: name, Attributes: fifo ? { FifoQueue: 'true' } : {} }),
  );
  queues.push(QueueUrl!);
  return QueueUrl!;
}

export interface Arrived {
  body: string;
  attributes: Record<string, string>;
  groupId: string | undefined;
  dedupeId: string | undefined;
}

/** ReceiveMessage (10 at a time, 1 s long polls), delete what was read, until the queue is empty. */
export async function receiveAll(queueUrl: string): Promise<Arrived[]> {
  const arrived: Arrived[] = [];
  for (;;) {
    const { Messages = [] } = await client.send(
      new sqs.ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['All'],
      }),
    );
    if (Messages.length === 0) return arrived;
    for (const m of Messages) {
      arrived.push({
        body: m.Body!,
        attributes: Object.fromEntries(
          Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [k, v.StringValue!]),
        ),
        groupId: m.Attributes?.MessageGroupId,
        dedupeId: m.Attributes?.MessageDeduplicationId,
      });
    }
    await client.send(
      new sqs.DeleteMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: Messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
      }),
    );
  }
}

export const envelope = (groupKey: string | null, payload?: unknown, extra: Partial<Envelope> = {}) =>
  makeEnvelope({ groupKey, payload, ...extra });

/** SendMessageBatch inputs the relay built, recorded on their way to the real SDK command. */
export function recordingCommands(
  calls: sqs.SendMessageBatchRequestEntry[][],
  tamper?: (entry: sqs.SendMessageBatchRequestEntry) => void,
): SqsCommands {
  class RecordingSendMessageBatchCommand extends sqs.SendMessageBatchCommand {
    constructor(input: sqs.SendMessageBatchCommandInput) {
      const entries = input.Entries!.map((entry) => ({ ...entry }));
      entries.forEach((entry) => tamper?.(entry));
      calls.push(entries);
      super({ ...input, Entries: entries });
    }
  }
  return {
    SendMessageBatchCommand: RecordingSendMessageBatchCommand,
    GetQueueAttributesCommand: sqs.GetQueueAttributesCommand,
  };
}

export async function started(options: Partial<SqsRelayOptions> & { queueUrl: string }): Promise<Relay> {
  const relay = sqsRelay({ client, ...options });
  await relay.start!();
  return relay;
}

export function outcomeSummary(outcomes: readonly DeliveryOutcome[] | void): string[] {
  return (outcomes ?? []).map((o) =>
    o.ok ? 'ok' : o.error === SKIPPED ? 'skipped' : (o.error as Error).name,
  );
}
