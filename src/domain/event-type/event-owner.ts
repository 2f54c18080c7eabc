import type { EventOwnerSelector } from './event-type.js';

/**
 * The owner value of an event (docs/security.md "Authorization: what a subject may do", per-event owners): with `static`, the
 * selector's value; with `path`, the value at the dot-separated path in the (enriched) event — a string,
 * or a number or boolean as text. Objects, arrays, null and missing fields have no owner value.
 * @param event the parsed event (only plain own properties are followed)
 * @returns the owner value, or undefined when it resolves to null (publishing such an event is blocked)
 */
export function eventOwner(selector: EventOwnerSelector, event: unknown): string | undefined {
  if (selector.type === 'static') return selector.value;
  let node: unknown = event;
  for (const segment of selector.value.split('.')) {
    if (typeof node !== 'object' || node === null || Array.isArray(node) || !Object.hasOwn(node, segment)) return undefined;
    node = (node as Record<string, unknown>)[segment];
  }
  if (typeof node === 'string') return node;
  if (typeof node === 'number' || typeof node === 'boolean') return String(node);
  return undefined;
}
