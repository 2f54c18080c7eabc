import type { CompatibilityMode } from '../event-type/event-type.js';
import { walkSchema, type JsonObject } from './json-schema-walk.js';
import { describeDifference, diffSchemas, highestLevel, type SchemaChangeLevel } from './schema-diff.js';

/**
 * Schema evolution of an event type (docs/concepts.md "Schema versions", "Schema versions"): how a new submitted schema differs from the previous one, which semantic version it
 * gets, and whether the compatibility mode allows it.
 *
 * The comparison (src/domain/schema/schema-diff.ts) walks both schemas side by side, keyword by keyword, at
 * subschema positions only (so a property named `title` or `required` is a property, not a keyword).
 * Inputs must have passed `guardSchema` (nesting depth ≤ 64), which bounds the recursion.
 */

export type { SchemaChangeLevel };

/** Result of {@link classifySchemaChange}: the overall level and one reason per difference. */
export interface SchemaChange {
  readonly level: SchemaChangeLevel;
  /** Each difference as `<JSON pointer>: <what changed>`, e.g. `#/properties/price: type changed from "number" to "string"`. */
  readonly reasons: string[];
}

/** Result of {@link evolveSchema}: the accepted change and the new version, or the reasons it is refused. */
export type SchemaEvolutionResult = { ok: true; level: SchemaChangeLevel; version: string } | { ok: false; reasons: string[] };

const MODE_RANK: Readonly<Record<CompatibilityMode, number>> = { none: 0, forward: 1, compatible: 2 };

/** The keywords that compatible mode forbids (docs/concepts.md "Schema versions"). */
const COMPATIBLE_MODE_FORBIDDEN = ['not', 'patternProperties', 'additionalProperties', 'additionalItems'] as const;

/**
 * Classifies the change from `previous` to `next` (both parsed and guard-checked) under `mode`
 * (docs/concepts.md "Schema versions"). The level is the highest level of any
 * difference; `reasons` lists every difference found (patch, minor and major), in document order.
 * An identical schema gives `{ level: 'none', reasons: [] }`. Never throws.
 */
export function classifySchemaChange(previous: JsonObject, next: JsonObject, mode: CompatibilityMode): SchemaChange {
  const differences = diffSchemas(previous, next, mode);
  return { level: highestLevel(differences), reasons: differences.map(describeDifference) };
}

/**
 * Next `MAJOR.MINOR.PATCH` version after a change of `level`: `patch` bumps PATCH, `minor` bumps
 * MINOR and resets PATCH, `major` bumps MAJOR and resets both, `none` returns `version` unchanged
 * (docs/concepts.md "Schema versions": the first schema is `1.0.0`).
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
 * Decides a schema update (docs/concepts.md "Schema versions"): classifies the
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
    return { ok: false, reasons: differences.filter((d) => d.level === 'major').map(describeDifference) };
  }
  return { ok: true, level, version: bumpVersion(previousVersion, level) };
}

/**
 * Every use of a keyword forbidden under mode `compatible` (`not`, `patternProperties`,
 * `additionalProperties`, `additionalItems`), anywhere in `schema`, as
 * `<pointer>: "<keyword>" is not allowed in compatible mode` (docs/concepts.md "Schema
 * versions"). Empty when the schema is usable under `compatible`.
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
 * none < forward < compatible (docs/concepts.md "Schema versions": non-admins may only move towards
 * stricter modes).
 */
export function isStricterOrEqualMode(from: CompatibilityMode, to: CompatibilityMode): boolean {
  return MODE_RANK[to] >= MODE_RANK[from];
}
