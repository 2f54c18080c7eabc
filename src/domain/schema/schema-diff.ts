/**
 * The structural comparison behind schema evolution (src/domain/schema/schema-evolution.ts;
 * docs/concepts.md "Schema versions"): two schemas walked side by side, keyword by
 * keyword, at subschema positions only (so a property named `title` or `required` is a property, not a
 * keyword), each difference recorded with its JSON pointer and its semantic-versioning level under the
 * compatibility mode. Inputs must have passed `guardSchema` (nesting depth ≤ 64), which bounds the
 * recursion. Pure.
 */
import type { CompatibilityMode } from '../event-type/event-type.js';
import { jsonEqual, own, sameSet } from '../json/json-equality.js';
import { isJsonObject, type JsonObject, type JsonValue } from './json-schema-walk.js';

/**
 * How much a schema changed, in semantic-versioning terms (docs/concepts.md "Schema versions"):
 * - `none`: identical (deep-equal, object key order ignored): no new version;
 * - `patch`: only `title`/`description` differ, or a textual change with no structural difference;
 * - `minor`: properties or definitions added; in `forward`/`none` also `required` extended, a type
 *   narrowed from empty to specific, `additionalProperties` changed from true/absent to a schema;
 * - `major`: anything else.
 */
export type SchemaChangeLevel = 'none' | 'patch' | 'minor' | 'major';

const LEVEL_RANK: Readonly<Record<SchemaChangeLevel, number>> = { none: 0, patch: 1, minor: 2, major: 3 };

/** One difference between the schemas: where, what, and its level under the mode. */
export interface Difference {
  readonly level: Exclude<SchemaChangeLevel, 'none'>;
  readonly pointer: string;
  readonly message: string;
}

/** Accumulates the differences of one comparison. */
interface Comparison {
  readonly mode: CompatibilityMode;
  readonly differences: Difference[];
}

/** Compares one keyword of two schema objects at `pointer` (either side may lack the keyword). */
type KeywordComparer = (previous: JsonValue | undefined, next: JsonValue | undefined, pointer: string, comparison: Comparison) => void;

/**
 * Every difference from `previous` to `next` under `mode`, in document order; empty when the two are
 * deep-equal (object key order ignored). Schemas that differ only textually give one `patch` at `#`.
 */
export function diffSchemas(previous: JsonObject, next: JsonObject, mode: CompatibilityMode): Difference[] {
  if (jsonEqual(previous, next)) return [];
  const comparison: Comparison = { mode, differences: [] };
  compareSchemas(previous, next, '#', comparison);
  if (comparison.differences.length === 0) {
    record(comparison, 'patch', '#', 'textual change with no structural difference');
  }
  return comparison.differences;
}

/** The highest level among `differences`; `none` for none. */
export function highestLevel(differences: readonly Difference[]): SchemaChangeLevel {
  let level: SchemaChangeLevel = 'none';
  for (const difference of differences) if (LEVEL_RANK[difference.level] > LEVEL_RANK[level]) level = difference.level;
  return level;
}

/** A difference as a reason line: `<JSON pointer>: <what changed>`. */
export function describeDifference(difference: Difference): string {
  return `${difference.pointer}: ${difference.message}`;
}

function record(comparison: Comparison, level: Difference['level'], pointer: string, message: string): void {
  comparison.differences.push({ level, pointer, message });
}

/** Level of a change that `forward` and `none` accept as minor and `compatible` does not. */
function forwardOnlyLevel(comparison: Comparison): Difference['level'] {
  return comparison.mode === 'compatible' ? 'major' : 'minor';
}

/** Suffix explaining why a forward-only change is major under `compatible`. */
function forwardOnlyNote(comparison: Comparison): string {
  return comparison.mode === 'compatible' ? ' (allowed only in forward and none modes)' : '';
}

/** Compares two subschemas keyword by keyword; non-object values (e.g. booleans) compare as values. */
function compareSchemas(previous: JsonValue, next: JsonValue, pointer: string, comparison: Comparison): void {
  if (!isJsonObject(previous) || !isJsonObject(next)) {
    if (!jsonEqual(previous, next)) record(comparison, 'major', pointer, `changed from ${formatValue(previous)} to ${formatValue(next)}`);
    return;
  }
  const keywords = new Set([...Object.keys(previous), ...Object.keys(next)]);
  for (const keyword of keywords) {
    const compare = KEYWORD_COMPARERS.get(keyword) ?? compareAssertion(keyword);
    compare(own(previous, keyword), own(next, keyword), pointer, comparison);
  }
}

/** The keywords with their own comparison; every other keyword is compared by {@link compareAssertion}. */
const KEYWORD_COMPARERS: ReadonlyMap<string, KeywordComparer> = new Map<string, KeywordComparer>([
  ['title', compareAnnotation('title')],
  ['description', compareAnnotation('description')],
  ['properties', compareSchemaMap('properties', 'property', 'minor')],
  ['definitions', compareSchemaMap('definitions', 'definition', 'minor')],
  ['patternProperties', compareSchemaMap('patternProperties', 'pattern property', 'major')],
  ['dependencies', compareDependencies],
  ['required', compareRequired],
  ['type', compareType],
  ['enum', compareEnum],
  ['additionalProperties', compareAdditionalProperties],
  ['additionalItems', compareAdditionalItems],
  ['items', compareItems],
  ['allOf', compareSchemaList('allOf')],
  ['anyOf', compareSchemaList('anyOf')],
  ['oneOf', compareSchemaList('oneOf')],
  ['not', compareNot],
]);

/** `title`, `description`: documentation only, a change is a patch. */
function compareAnnotation(keyword: string): KeywordComparer {
  return (previous, next, pointer, comparison) => {
    if (!jsonEqual(previous, next)) record(comparison, 'patch', pointer, `${keyword} ${describeValueChange(previous, next)}`);
  };
}

/** Any other keyword (`format`, `pattern`, `minimum`, `$ref`, ...): every change is major. */
function compareAssertion(keyword: string): KeywordComparer {
  return (previous, next, pointer, comparison) => {
    if (!jsonEqual(previous, next)) record(comparison, 'major', pointer, `${keyword} ${describeValueChange(previous, next)}`);
  };
}

/**
 * `properties`, `definitions`, `patternProperties`: entries present on both sides are compared
 * recursively; an added entry has level `addedLevel`, a removed entry is always major.
 */
function compareSchemaMap(keyword: string, entryName: string, addedLevel: Difference['level']): KeywordComparer {
  return (previous, next, pointer, comparison) => {
    const before = previous ?? {};
    const after = next ?? {};
    if (!isJsonObject(before) || !isJsonObject(after)) {
      compareAssertion(keyword)(previous, next, pointer, comparison);
      return;
    }
    const names = new Set([...Object.keys(before), ...Object.keys(after)]);
    for (const name of names) {
      const entryPointer = `${pointer}/${keyword}/${escapePointerSegment(name)}`;
      const beforeEntry = own(before, name);
      const afterEntry = own(after, name);
      if (beforeEntry === undefined) record(comparison, addedLevel, entryPointer, `${entryName} added`);
      else if (afterEntry === undefined) record(comparison, 'major', entryPointer, `${entryName} removed`);
      else compareSchemas(beforeEntry, afterEntry, entryPointer, comparison);
    }
  };
}

/** `dependencies`: schema dependencies compare recursively, property dependencies as sets; any other change is major. */
function compareDependencies(previous: JsonValue | undefined, next: JsonValue | undefined, pointer: string, comparison: Comparison): void {
  const before = previous ?? {};
  const after = next ?? {};
  if (!isJsonObject(before) || !isJsonObject(after)) {
    compareAssertion('dependencies')(previous, next, pointer, comparison);
    return;
  }
  const names = new Set([...Object.keys(before), ...Object.keys(after)]);
  for (const name of names) {
    const entryPointer = `${pointer}/dependencies/${escapePointerSegment(name)}`;
    const beforeEntry = own(before, name);
    const afterEntry = own(after, name);
    if (isJsonObject(beforeEntry) && isJsonObject(afterEntry)) compareSchemas(beforeEntry, afterEntry, entryPointer, comparison);
    else if (!sameSet(beforeEntry, afterEntry)) record(comparison, 'major', entryPointer, `dependency ${describeValueChange(beforeEntry, afterEntry)}`);
  }
}

/** `required` (order ignored): a removed name is major; an added name is minor in forward/none, major in compatible. */
function compareRequired(previous: JsonValue | undefined, next: JsonValue | undefined, pointer: string, comparison: Comparison): void {
  const before = stringSet(previous);
  const after = stringSet(next);
  if (before === undefined || after === undefined) {
    compareAssertion('required')(previous, next, pointer, comparison);
    return;
  }
  for (const name of after) {
    if (!before.has(name)) record(comparison, forwardOnlyLevel(comparison), pointer, `required property ${JSON.stringify(name)} added${forwardOnlyNote(comparison)}`);
  }
  for (const name of before) {
    if (!after.has(name)) record(comparison, 'major', pointer, `required property ${JSON.stringify(name)} removed`);
  }
}

/** `type` (a name or a list, order ignored): empty → specific is minor in forward/none; any other change is major. */
function compareType(previous: JsonValue | undefined, next: JsonValue | undefined, pointer: string, comparison: Comparison): void {
  if (sameSet(toList(previous), toList(next))) return;
  if (previous === undefined) {
    record(comparison, forwardOnlyLevel(comparison), pointer, `type narrowed from any to ${formatValue(next)}${forwardOnlyNote(comparison)}`);
    return;
  }
  compareAssertion('type')(previous, next, pointer, comparison);
}

/** `enum` (order ignored): any change of the allowed values is major. */
function compareEnum(previous: JsonValue | undefined, next: JsonValue | undefined, pointer: string, comparison: Comparison): void {
  if (!sameSet(previous, next)) compareAssertion('enum')(previous, next, pointer, comparison);
}

/**
 * `additionalProperties` (absent means true): true → a schema is minor in forward/none; schema →
 * schema compares recursively; any other change is major.
 */
function compareAdditionalProperties(previous: JsonValue | undefined, next: JsonValue | undefined, pointer: string, comparison: Comparison): void {
  const before = previous ?? true;
  const after = next ?? true;
  if (before === true && isJsonObject(after)) {
    record(comparison, forwardOnlyLevel(comparison), pointer, `additionalProperties changed from true to a schema${forwardOnlyNote(comparison)}`);
    return;
  }
  compareOptionalSubschema('additionalProperties', before, after, pointer, comparison);
}

/** `additionalItems` (absent means true): schema → schema compares recursively; any other change is major. */
function compareAdditionalItems(previous: JsonValue | undefined, next: JsonValue | undefined, pointer: string, comparison: Comparison): void {
  compareOptionalSubschema('additionalItems', previous ?? true, next ?? true, pointer, comparison);
}

function compareOptionalSubschema(keyword: string, before: JsonValue, after: JsonValue, pointer: string, comparison: Comparison): void {
  if (isJsonObject(before) && isJsonObject(after)) compareSchemas(before, after, `${pointer}/${keyword}`, comparison);
  else if (!jsonEqual(before, after)) record(comparison, 'major', pointer, `${keyword} changed from ${formatValue(before)} to ${formatValue(after)}`);
}

/** `items`: a schema or a tuple of schemas compares recursively; switching forms or tuple length is major. */
function compareItems(previous: JsonValue | undefined, next: JsonValue | undefined, pointer: string, comparison: Comparison): void {
  if (isJsonObject(previous) && isJsonObject(next)) {
    compareSchemas(previous, next, `${pointer}/items`, comparison);
    return;
  }
  compareSchemaList('items')(previous, next, pointer, comparison);
}

/** `allOf`, `anyOf`, `oneOf` (and tuple `items`): same length compares position by position; otherwise major. */
function compareSchemaList(keyword: string): KeywordComparer {
  return (previous, next, pointer, comparison) => {
    if (Array.isArray(previous) && Array.isArray(next) && previous.length === next.length) {
      previous.forEach((item, i) => compareSchemas(item, next[i] ?? null, `${pointer}/${keyword}/${i}`, comparison));
      return;
    }
    compareAssertion(keyword)(previous, next, pointer, comparison);
  };
}

/**
 * `not`: the subschema's meaning is inverted, so a change that would be minor inside it (e.g. an
 * added property) can reject events it used to accept: everything but title/description is major.
 */
function compareNot(previous: JsonValue | undefined, next: JsonValue | undefined, pointer: string, comparison: Comparison): void {
  if (!isJsonObject(previous) || !isJsonObject(next)) {
    compareAssertion('not')(previous, next, pointer, comparison);
    return;
  }
  const inner: Comparison = { mode: comparison.mode, differences: [] };
  compareSchemas(previous, next, `${pointer}/not`, inner);
  for (const difference of inner.differences) {
    const level = difference.level === 'patch' ? 'patch' : 'major';
    const note = level === difference.level ? '' : ' (inside "not")';
    record(comparison, level, difference.pointer, difference.message + note);
  }
}

// ---------------------------------------------------------------------------------------------------
// Value helpers, and how values and pointers are written in reasons

function toList(value: JsonValue | undefined): JsonValue | undefined {
  return value === undefined || Array.isArray(value) ? value : [value];
}

function stringSet(value: JsonValue | undefined): Set<string> | undefined {
  if (value === undefined) return new Set();
  if (!Array.isArray(value) || !value.every((v): v is string => typeof v === 'string')) return undefined;
  return new Set(value);
}

/** `added: X`, `removed (was X)` or `changed from X to Y`. */
function describeValueChange(previous: JsonValue | undefined, next: JsonValue | undefined): string {
  if (previous === undefined) return `added: ${formatValue(next)}`;
  if (next === undefined) return `removed (was ${formatValue(previous)})`;
  return `changed from ${formatValue(previous)} to ${formatValue(next)}`;
}

const MAX_FORMATTED_LENGTH = 80;

/** Short JSON text of a value for a reason (schemas and long values are abbreviated). */
function formatValue(value: JsonValue | undefined): string {
  if (value === undefined) return 'absent';
  if (isJsonObject(value)) return 'a schema';
  const text = JSON.stringify(value);
  return text.length > MAX_FORMATTED_LENGTH ? `${text.slice(0, MAX_FORMATTED_LENGTH - 1)}…` : text;
}

/** RFC 6901 escaping of one pointer segment. */
function escapePointerSegment(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}
