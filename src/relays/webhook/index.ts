/**
 * `outboxer/webhook`: relays messages as signed HTTP POSTs (Standard Webhooks), and verifies them
 * in receivers.
 * @packageDocumentation
 */
export { webhookRelay } from './webhook-relay.js';
export type {
  WebhookRelayOptions,
  WebhookBody,
  WebhookFetch,
  WebhookRequestInit,
  WebhookResponse,
} from './webhook-options.js';
export {
  signWebhook,
  verifyWebhook,
  WebhookVerificationError,
  WEBHOOK_HEADERS,
  type VerifyWebhookOptions,
  type VerifiedWebhook,
  type WebhookHeadersLike,
  type WebhookVerificationFailure,
} from './webhook-signature.js';
export * from '../../receivers/webhook/index.js';
