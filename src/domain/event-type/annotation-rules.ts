/**
 * Annotations and labels of event types and subscriptions (docs/concepts.md "Event types"; labels follow the same key
 * syntax, their values Kubernetes label values): key syntax, the reserved `broker.io/` prefix, value
 * sizes and the number of entries. Pure: no I/O. Status convention (docs/http-api.md "Errors"): a wrong
 * JSON type is 400, every other problem 422.
 */
import { Buffer } from 'node:buffer';
import { isJsonObject } from '../schema/json-schema-walk.js';
import { Problems, type RuleProblem } from './rule-problems.js';

/** Annotation key prefix reserved for the service (docs/concepts.md "Event types"). */
export const RESERVED_ANNOTATION_PREFIX = 'broker.io';
/** Largest annotation value in UTF-8 bytes (docs/concepts.md "Event types"). */
export const MAX_ANNOTATION_VALUE_BYTES = 1000;
/** Longest label value in characters (the rule of Kubernetes label values, which labels follow). */
export const MAX_LABEL_VALUE_LENGTH = 63;
/**
 * Most entries in one `annotations` or `labels` map of an event type or subscription, so a record's
 * size stays bounded (docs/security.md "Hostile input"). 100 annotations of up to 1000 bytes fit in a control-plane body many times.
 */
export const MAX_ANNOTATIONS = 100;

const MAX_KEY_NAME_LENGTH = 63;
const MAX_KEY_PREFIX_LENGTH = 253;
const MAX_DNS_LABEL_LENGTH = 63;
const KEY_NAME_PATTERN = /^[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const DNS_LABEL_PATTERN = /^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE_PATTERN = /^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

/** Problems of one annotation or label key (docs/concepts.md "Event types"); `serviceKeys` may use the reserved prefix. */
function keyProblems(key: string, field: string, p: Problems, serviceKeys: ReadonlySet<string>): void {
  const at = `Field "${field}" key ${JSON.stringify(key)}`;
  const slash = key.indexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (name.length === 0 || name.length > MAX_KEY_NAME_LENGTH) {
    p.line(422, `${at} must have a name of 1 to ${MAX_KEY_NAME_LENGTH} characters`);
  } else if (!KEY_NAME_PATTERN.test(name)) {
    p.line(422, `${at} must have a name that begins and ends with an alphanumeric character and contains only alphanumerics, "-", "_" and "."`);
  }
  if (prefix === undefined) return;
  if (prefix.length === 0 || prefix.length > MAX_KEY_PREFIX_LENGTH) {
    p.line(422, `${at} must have a prefix of 1 to ${MAX_KEY_PREFIX_LENGTH} characters`);
  } else if (!prefix.split('.').every((label) => label.length <= MAX_DNS_LABEL_LENGTH && DNS_LABEL_PATTERN.test(label))) {
    p.line(422, `${at} must have a prefix that is a DNS subdomain (lower-case RFC 1123 labels separated by dots)`);
  } else if (prefix === RESERVED_ANNOTATION_PREFIX && !serviceKeys.has(key)) {
    p.line(422, `${at} uses the prefix "${RESERVED_ANNOTATION_PREFIX}/", which is reserved for the service`);
  }
}

/**
 * Every problem of an `annotations` or `labels` map (docs/concepts.md "Event types"; labels follow the same key syntax,
 * and their values follow Kubernetes label values). `null`/absent is fine. A non-object map or a non-string
 * value is 400; more than {@link MAX_ANNOTATIONS} entries is one 422 (the entries are then not looked at); a bad key (name ≤ 63 characters, alphanumeric at both ends, `-_.` inside; optional prefix
 * that is a lower-case DNS subdomain ≤ 253 characters, not the reserved `broker.io`), an annotation value
 * over 1000 UTF-8 bytes, or a label value over 63 characters or not alphanumeric at both ends is 422.
 * @param serviceKeys keys under the reserved prefix that this resource may carry (the service's own
 *   annotations, e.g. the dead-letter settings of subscriptions); their values are the caller's to check
 */
export function annotationProblems(map: unknown, field: 'annotations' | 'labels', serviceKeys: ReadonlySet<string> = new Set()): RuleProblem[] {
  const p = new Problems();
  if (map === undefined || map === null) return p.list;
  if (!isJsonObject(map)) {
    p.malformed(field, 'must be an object of string values');
    return p.list;
  }
  const entries = Object.entries(map);
  if (entries.length > MAX_ANNOTATIONS) {
    p.rule(field, `has ${entries.length} entries; at most ${MAX_ANNOTATIONS} are allowed (entries per map)`);
    return p.list;
  }
  for (const [key, value] of entries) {
    keyProblems(key, field, p, serviceKeys);
    const at = `Field "${field}" value of key ${JSON.stringify(key)}`;
    if (typeof value !== 'string') {
      p.line(400, `${at} must be a string`);
    } else if (field === 'annotations') {
      if (Buffer.byteLength(value, 'utf8') > MAX_ANNOTATION_VALUE_BYTES) p.line(422, `${at} must be at most ${MAX_ANNOTATION_VALUE_BYTES} bytes (UTF-8)`);
    } else if (value.length > MAX_LABEL_VALUE_LENGTH) {
      p.line(422, `${at} must be at most ${MAX_LABEL_VALUE_LENGTH} characters`);
    } else if (!LABEL_VALUE_PATTERN.test(value)) {
      p.line(422, `${at} must be empty or begin and end with an alphanumeric character and contain only alphanumerics, "-", "_" and "."`);
    }
  }
  return p.list;
}

/**
 * Validates an `annotations` or `labels` map (docs/concepts.md "Event types"): the detail lines of
 * {@link annotationProblems}, empty when the map is fine or absent. Callers that need the 400/422
 * distinction use {@link annotationProblems}.
 */
export function validateAnnotations(map: unknown, field: 'annotations' | 'labels'): string[] {
  return annotationProblems(map, field).map((problem) => problem.detail);
}
