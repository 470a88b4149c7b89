/**
 * The webhook receiver: verifies the webhook relay's signed requests and handles each once
 * through an inbox. Exported from `outboxer/webhook`, beside the relay.
 */
export {
  webhookReceiver,
  type ReceivedWebhook,
  type WebhookAnswer,
  type WebhookReceiver,
  type WebhookReceiverOptions,
  type WebhookReceiverOwnOptions,
  type WebhookRequestParts,
} from './webhook-receiver.js';
export {
  nodeWebhookReceiver,
  expressWebhookReceiver,
  fastifyWebhookReceiver,
  type FastifyWebhookInstanceLike,
  type FastifyWebhookReplyLike,
  type FastifyWebhookRequestLike,
} from './webhook-receiver-node.js';
