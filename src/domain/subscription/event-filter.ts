/**
 * Consumer filters (docs/consuming.md "Filters"): a draft-04 JSON Schema that an event, as a consumer
 * receives it (`metadata` included), must satisfy to be delivered. A filter is named by a key made from
 * its canonical text, so the worker threads keep one validator per distinct filter however it was
 * spelled.
 *
 * Pure: no I/O.
 */
import { createHash } from 'node:crypto';
import { canonicalJson } from '../json/canonical-json.js';

/** A filter as the reader and the workers use it: its canonical JSON text and the key of that text. */
export interface EventFilterSpec {
  /** `filter:` and the SHA-256 of {@link text} in hex; never equal to an event type's schema key. */
  readonly key: string;
  /** The schema as canonical JSON (object keys sorted, no whitespace). */
  readonly text: string;
}

/**
 * The key and canonical text of a filter given as JSON text.
 * @returns undefined when the text is not JSON (nested at most 512 levels)
 */
export function filterSpecOf(text: string): EventFilterSpec | undefined {
  const canonical = canonicalJson(text);
  return canonical === undefined ? undefined : { key: `filter:${createHash('sha256').update(canonical).digest('hex')}`, text: canonical };
}
