import { typedId } from '../../internal/ids.js';

/** An envelope or control request id: "msg_" + 32 hex digits of a UUIDv7. */
export function messageId(): string {
  return typedId('msg_');
}

/** A correlation id: "corr_" + 32 hex digits of a UUIDv7. */
export function correlationId(): string {
  return typedId('corr_');
}
