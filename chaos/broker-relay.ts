/**
 * The relay of the broker outbox (`CHAOS_BROKER`): outboxer's own Kafka relay (through a
 * @platformatic/kafka producer) or RabbitMQ relay (amqplib, a connection it opens again after a
 * drop), unchanged, so that the run proves the relays users run.
 */
import { Producer } from '@platformatic/kafka';
import amqp from 'amqplib';
import type { Relay } from 'outboxer';
import { kafkaRelay, platformaticProducer } from 'outboxer/kafka';
import { rabbitmqRelay } from 'outboxer/rabbitmq';
import { queueOf, type BrokerEnvironment } from './broker.js';

export interface BrokerRelay {
  relay: Relay;
  /** Closes what the relay does not own (the Kafka producer), after `outboxer.stop()`. */
  close(): Promise<void>;
}

export function brokerRelay(broker: BrokerEnvironment, label: string): BrokerRelay {
  if (broker.kind === 'kafka') {
    const producer = new Producer({
      clientId: `chaos-${label}`,
      bootstrapBrokers: [broker.url],
      idempotent: true,
    });
    return {
      relay: kafkaRelay({ producer: platformaticProducer(producer), topic: broker.destination }),
      close: () => producer.close(),
    };
  }
  return {
    relay: rabbitmqRelay({
      connection: () => amqp.connect(broker.url),
      exchange: broker.destination,
      // A group always goes to the same queue, read by one consumer at a time.
      routingKey: (m) => queueOf(broker.queues, m.groupKey ?? String(m.id)),
      timeout: 10_000,
    }),
    close: async () => undefined,
  };
}
