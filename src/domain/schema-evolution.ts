import type { CompatibilityMode } from './event-type.js';
import { isJsonObject, walkSchema, type JsonObject, type JsonValue } from './json-schema-walk.js';

/**
 * Schema evolution of an event type (spec "Compatibility modes"; WIRE.md "Schema versions (semantic
 * versioning)"): how a new submitted schema differs from the previous one, which semantic version it
 * gets, and whether the compatibility mode allows it.
 *
 * The comparison walks both schemas side by side, keyword by keyword, at subschema positions only
 * (so a property named `title` or `required` is a property, not a keyword). Inputs must have passed
 * `guardSchema` (nesting depth ≤ 64), which bounds the recursion.
 */

/**
 * How much a schema changed, in semantic-versioning terms (WIRE.md "Schema versions"):
 * - `none`: identical (deep-equal, object key order ignored): no new version;
 * - `patch`: only `title`/`description` differ, or a textual change with no structural difference;
 * - `minor`: properties or definitions added; in `forward`/`none` also `required` extended, a type
 *   narrowed from empty to specific, `additionalProperties` changed from true/absent to a schema;
 * - `major`: anything else.
 */
export type SchemaChangeLevel = 'none' | 'patch' | 'minor' | 'major';

/** Result of {@link classifySchemaChange}: the overall level and one reason per difference. */
export interface SchemaChange {
  readonly level: SchemaChangeLevel;
  /** Each difference as `<JSON pointer>: <what changed>`, e.g. `#/properties/price: type changed from "number" to "string"`. */
  readonly reasons: string[];
}

/** Result of {@link evolveSchema}: the accepted change and the new version, or the reasons it is refused. */
export type SchemaEvolutionResult = { ok: true; level: SchemaChangeLevel; version: string } | { ok: false; reasons: string[] };

const LEVEL_RANK: Readonly<Record<SchemaChangeLevel, number>> = { none: 0, patch: 1, minor: 2, major: 3 };
const MODE_RANK: Readonly<Record<CompatibilityMode, number>> = { none: 0, forward: 1, compatible: 2 };

/** The keywords that compatible mode forbids (spec "Compatibility modes"; WIRE.md "Effective schema and metadata"). */
const COMPATIBLE_MODE_FORBIDDEN = ['not', 'patternProperties', 'additionalProperties', 'additionalItems'] as const;

/**
 * Classifies the change from `previous` to `next` (both parsed and guard-checked) under `mode`
 * (WIRE.md "Schema versions"; spec "Compatibility modes"). The level is the highest level of any
 * difference; `reasons` lists every difference found (patch, minor and major), in document order.
 * An identical schema gives `{ level: 'none', reasons: [] }`. Never throws.
 */
export function classifySchemaChange(previous: JsonObject, next: JsonObject, mode: CompatibilityMode): SchemaChange {
  const differences = diffSchemas(previous, next, mode);
  return { level: highestLevel(differences), reasons: differences.map(describe) };
}

/**
 * Next `MAJOR.MINOR.PATCH` version after a change of `level`: `patch` bumps PATCH, `minor` bumps
 * MINOR and resets PATCH, `major` bumps MAJOR and resets both, `none` returns `version` unchanged
 * (WIRE.md "Schema versions": the first schema is `1.0.0`).
 * @throws RangeError when `version` is not `MAJOR.MINOR.PATCH` (non-negative integers, no leading zeros)
 */
export function bumpVersion(version: string, level: SchemaChangeLevel): string {
  const match = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$/.exec(version);
  if (match === null) throw new RangeError(`"${version}" is not a MAJOR.MINOR.PATCH version`);
  const [major, minor, patch] = match.slice(1).map(Number) as [number, number, number];
  switch (level) {
    case 'none':
      return version;
    case 'patch':
      return `${major}.${minor}.${patch + 1}`;
    case 'minor':
      return `${major}.${minor + 1}.0`;
    case 'major':
      return `${major + 1}.0.0`;
  }
}

/**
 * Decides a schema update (WIRE.md "Schema versions"; spec "Compatibility modes"): classifies the
 * change and bumps `previousVersion` accordingly. A `major` change is refused under `forward` and
 * `compatible` (`ok: false` with the reasons that make it major, for a 422 detail) and accepted with a
 * MAJOR bump under `none`. An identical schema gives `level: 'none'` and the same version (the caller
 * stores no new version). Does not check {@link compatibleModeViolations}; callers do that separately.
 * @throws RangeError when `previousVersion` is not `MAJOR.MINOR.PATCH`
 */
export function evolveSchema(previous: JsonObject, next: JsonObject, previousVersion: string, mode: CompatibilityMode): SchemaEvolutionResult {
  const differences = diffSchemas(previous, next, mode);
  const level = highestLevel(differences);
  if (level === 'major' && mode !== 'none') {
    return { ok: false, reasons: differences.filter((d) => d.level === 'major').map(describe) };
  }
  return { ok: true, level, version: bumpVersion(previousVersion, level) };
}

/**
 * Every use of a keyword forbidden under mode `compatible` (`not`, `patternProperties`,
 * `additionalProperties`, `additionalItems`), anywhere in `schema`, as
 * `<pointer>: "<keyword>" is not allowed in compatible mode` (spec "Compatibility modes"; WIRE.md
 * "Effective schema and metadata"). Empty when the schema is usable under `compatible`.
 */
export function compatibleModeViolations(schema: JsonObject): string[] {
  const violations: string[] = [];
  walkSchema(schema, (node, pointer) => {
    for (const keyword of COMPATIBLE_MODE_FORBIDDEN) {
      if (Object.hasOwn(node, keyword)) violations.push(`${pointer}: "${keyword}" is not allowed in compatible mode`);
    }
  });
  return violations;
}

/**
 * True when moving from mode `from` to mode `to` keeps or tightens the guarantees, with the order
 * none < forward < compatible (spec "Compatibility modes"; WIRE.md "Schema versions": non-admins may
 * only move towards stricter modes).
 */
export function isStricterOrEqualMode(from: CompatibilityMode, to: CompatibilityMode): boolean {
  return MODE_RANK[to] >= MODE_RANK[from];
}

// ---------------------------------------------------------------------------------------------------
// Structural comparison

/** One difference between the schemas: where, what, and its level under the mode. */
interface Difference {
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

function diffSchemas(previous: JsonObject, next: JsonObject, mode: CompatibilityMode): Difference[] {
  if (jsonEqual(previous, next)) return [];
  const comparison: Comparison = { mode, differences: [] };
  compareSchemas(previous, next, '#', comparison);
  if (comparison.differences.length === 0) {
    record(comparison, 'patch', '#', 'textual change with no structural difference');
  }
  return comparison.differences;
}

function highestLevel(differences: readonly Difference[]): SchemaChangeLevel {
  let level: SchemaChangeLevel = 'none';
  for (const difference of differences) if (LEVEL_RANK[difference.level] > LEVEL_RANK[level]) level = difference.level;
  return level;
}

function describe(difference: Difference): string {
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
// JSON helpers

/** Deep equality of JSON values; object key order is ignored, array order is not. */
function jsonEqual(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, i) => jsonEqual(item, b[i]));
  }
  if (!isJsonObject(a) || !isJsonObject(b)) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && jsonEqual(own(a, key), own(b, key)));
}

/** The object's own value at `key` (never an inherited one such as `constructor`). */
function own(object: JsonObject, key: string): JsonValue | undefined {
  return Object.hasOwn(object, key) ? object[key] : undefined;
}

/**
 * Equality of two arrays as sets of JSON values (non-arrays compare with {@link jsonEqual}). Linear in
 * the values' size (each value becomes its canonical text once), so a large `enum` cannot make a
 * schema update quadratic on the main thread (issue 13 §1).
 */
function sameSet(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  if (!Array.isArray(a) || !Array.isArray(b)) return jsonEqual(a, b);
  const left = new Set(a.map(canonicalJson));
  const right = new Set(b.map(canonicalJson));
  return left.size === right.size && [...left].every((text) => right.has(text));
}

/** JSON text with object keys sorted: equal for values {@link jsonEqual} calls equal. */
function canonicalJson(value: JsonValue): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (!isJsonObject(value)) return JSON.stringify(value);
  const keys = Object.keys(value).sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key] ?? null)}`).join(',')}}`;
}

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
