/**
 * The `GET /event-types` answer built from the records' stored bytes: at 10,000 event types (16 MB)
 * decoding, parsing and serializing every record again would cost a quarter of the listing's time,
 * most of it garbage collection (docs/decisions/0018-event-type-listing-from-stored-bytes.md).
 */
import { servedEventType, type AuthorizationAttribute, type EventType } from '../../domain/event-type/event-type.js';

/** Which event types a listing keeps: those of one owning application, those whose `writers` name `writer` explicitly. */
export interface EventTypeListFilter {
  readonly owningApplication?: string;
  readonly writer?: AuthorizationAttribute;
}

/**
 * Every event type as the JSON `GET /event-types` answers (UTF-8: an array of the records, in the
 * order given, which the store sorts by name), optionally filtered. The records go out as stored
 * (`JSON.stringify` of each, the same text serializing the parsed record gives); only a filter parses
 * them, to test them.
 * @param stored each record's stored bytes (UTF-8 JSON)
 */
export function eventTypeListJson(stored: readonly Buffer[], filter: EventTypeListFilter): Buffer {
  const { owningApplication, writer } = filter;
  const kept = (
    owningApplication === undefined && writer === undefined
      ? stored
      : stored.filter((bytes) => {
          const et = JSON.parse(bytes.toString('utf8')) as EventType;
          return (
            (owningApplication === undefined || et.owning_application === owningApplication) &&
            (writer === undefined || (et.authorization?.writers ?? []).some((a) => a.data_type === writer.data_type && a.value === writer.value))
          );
        })
  ).map(withPartitionKeyFields);
  return jsonArrayOf(kept);
}

const STRATEGY_KEY = Buffer.from('"partition_strategy":"');
const KEY_FIELDS_KEY = Buffer.from(',"partition_key_fields":');

/**
 * A stored record's bytes as served ({@link servedEventType}): unchanged when `partition_key_fields`
 * follows `partition_strategy`, as in every record `toEventTypeRecord` (src/domain/event-type/event-type-record.ts) builds (a byte comparison, no
 * parsing; the first `"partition_strategy":"` is the record's own key, since the fields before it hold
 * no unescaped quote), else parsed and given `partition_key_fields: []`.
 */
function withPartitionKeyFields(bytes: Buffer): Buffer {
  const at = bytes.indexOf(STRATEGY_KEY);
  const valueEnd = at < 0 ? -1 : bytes.indexOf(0x22, at + STRATEGY_KEY.length);
  if (valueEnd >= 0 && bytes.subarray(valueEnd + 1, valueEnd + 1 + KEY_FIELDS_KEY.length).equals(KEY_FIELDS_KEY)) return bytes;
  return Buffer.from(JSON.stringify(servedEventType(JSON.parse(bytes.toString('utf8')) as EventType)));
}

/** `[a,b,…]` of JSON texts given as UTF-8 bytes, in one buffer. */
function jsonArrayOf(items: readonly Buffer[]): Buffer {
  let length = 2 + Math.max(0, items.length - 1);
  for (const item of items) length += item.byteLength;
  const out = Buffer.allocUnsafe(length);
  let at = 0;
  out[at++] = 0x5b;
  items.forEach((item, i) => {
    if (i > 0) out[at++] = 0x2c;
    at += item.copy(out, at);
  });
  out[at] = 0x5d;
  return out;
}
