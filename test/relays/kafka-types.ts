/**
 * Compile-time checks, run by `tsc --noEmit -p .` (this file is never executed): `platformaticProducer`
 * takes the Producer of either major of @platformatic/kafka that outboxer supports (2.x, and 1.x
 * installed here as `platformatic-kafka-v1`) when it sends Buffers, and refuses one with serializers
 * for other types, which would mangle the relay's Buffers. Each `@ts-expect-error` fails the
 * typecheck if the line below it ever compiles.
 */
import type { Producer as Producer2 } from '@platformatic/kafka';
import type { Producer as Producer1 } from 'platformatic-kafka-v1';
import { platformaticProducer } from 'outboxer/kafka';

export function platformaticProducerTypes(
  current: Producer2,
  previous: Producer1,
  currentWithStrings: Producer2<string, string, string, string>,
  previousWithStrings: Producer1<string, string, string, string>,
) {
  platformaticProducer(current);
  platformaticProducer(previous);
  // @ts-expect-error a producer with string serializers would turn the relay's Buffers into no value
  platformaticProducer(currentWithStrings);
  // @ts-expect-error the same on 1.x
  platformaticProducer(previousWithStrings);
}
