/**
 * A canonical text of JSON, so two schemas that differ only in key order and whitespace compare equal
 * (finding a stored schema version by its text, docs/publishing.md "Schema versions").
 */
import { parseUntrustedJson } from './json-limits.js';

/** JSON text in a canonical form (object keys sorted, no whitespace), or undefined when it is not JSON nested at most 512 levels. */
export function canonicalJson(text: string): string | undefined {
  const parsed = parseUntrustedJson(Buffer.from(text));
  return parsed.ok ? JSON.stringify(sortKeys(parsed.value)) : undefined;
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (!isObject(value)) return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, sortKeys(value[key])]),
  );
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
