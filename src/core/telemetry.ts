import diagnostics from 'node:diagnostics_channel';

/**
 * The events outboxer publishes on `node:diagnostics_channel`. Payloads are built only when
 * someone subscribes. See docs/telemetry.md for every field.
 */
export const channels = {
  publish: diagnostics.channel('outboxer:publish'),
  batchStart: diagnostics.channel('outboxer:batch:start'),
  batchStop: diagnostics.channel('outboxer:batch:stop'),
  messageRetry: diagnostics.channel('outboxer:message:retry'),
  messageDead: diagnostics.channel('outboxer:message:dead'),
  groupBlocked: diagnostics.channel('outboxer:group:blocked'),
  groupUnblocked: diagnostics.channel('outboxer:group:unblocked'),
  prune: diagnostics.channel('outboxer:prune'),
  leaseAcquired: diagnostics.channel('outboxer:lease:acquired'),
  leaseReleased: diagnostics.channel('outboxer:lease:released'),
  leaseLost: diagnostics.channel('outboxer:lease:lost'),
  error: diagnostics.channel('outboxer:error'),
  dashboardAction: diagnostics.channel('outboxer:dashboard:action'),
  dashboardRefused: diagnostics.channel('outboxer:dashboard:refused'),
  inboxHandled: diagnostics.channel('outboxer:inbox:handled'),
  inboxDuplicate: diagnostics.channel('outboxer:inbox:duplicate'),
  inboxOutOfOrder: diagnostics.channel('outboxer:inbox:out-of-order'),
  inboxPrune: diagnostics.channel('outboxer:inbox:prune'),
} as const;

export type ChannelName = keyof typeof channels;

/** Publishes `build()` on a channel, building it only when there is a subscriber. */
export function emit(channel: diagnostics.Channel, build: () => object): void {
  if (channel.hasSubscribers) channel.publish(build());
}
