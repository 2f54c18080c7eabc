/**
 * Why the broker ended a stream (docs/consuming.md "Why a stream ended"): the machine-readable
 * `info.stream_close_reason` of a stream's last batch, beside the `info.debug` text people read. Types
 * and constants only, no I/O.
 */
import type { Static } from '@sinclair/typebox';
import { StringEnum } from '../json/wire-parts.js';

/** Every reason, in the order of the docs' table. */
export const STREAM_CLOSE_REASONS = [
  'stream_limit_reached',
  'stream_timeout_reached',
  'keep_alive_limit_reached',
  'commit_timeout_reached',
  'event_type_repartitioned',
  'cursors_reset',
  'node_shutting_down',
  'subscription_deleted',
  'event_type_deleted',
  'authorization_changed',
  'consumption_blocked',
  'session_lost',
] as const;

/** `info.stream_close_reason` of a stream's last batch (OpenAPI: a string enum). */
export const StreamCloseReasonSchema = StringEnum(STREAM_CLOSE_REASONS, {
  description:
    'on the last batch of a stream the broker ended, why (docs/consuming.md "Why a stream ended"); `debug` says the same in words. Values may be added: treat an unknown one as a reason to reconnect',
});

/** One of {@link STREAM_CLOSE_REASONS}. */
export type StreamCloseReason = Static<typeof StreamCloseReasonSchema>;

/** Why a stream ends: the reason code and the `info.debug` text of its last batch. */
export interface StreamClose {
  readonly reason: StreamCloseReason;
  readonly debug: string;
}

/** A {@link StreamClose}. */
export function streamClose(reason: StreamCloseReason, debug: string): StreamClose {
  return { reason, debug };
}
