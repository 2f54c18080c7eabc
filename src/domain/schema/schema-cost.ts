import RE2 from 're2';
import { isJsonObject, resolveLocalRef, SCHEMA_ARRAY_KEYWORDS, walkSchema, type JsonObject, type JsonValue } from './json-schema-walk.js';

/**
 * The validation cost budget of an event type schema (docs/publishing.md "Schema cost budget"). A
 * schema is refused at registration (422) when validating one event against it could cost more than
 * this, whatever the event: the budget bounds the work per value of an event, so validating an event
 * costs at most `maxApplicationsPerValue` subschema applications per JSON value it contains, and the
 * event size limit bounds the values.
 */
export interface SchemaCostLimits {
  /**
   * Most subschemas that may be applied to one value of an event (the value itself, through `$ref`,
   * `allOf`, `anyOf`, `oneOf`, `not` and schema `dependencies`, counted with repetition). The
   * exponential `$ref` fan-out (d_i = allOf of two refs to d_(i-1)) needs 2^i of them.
   */
  readonly maxApplicationsPerValue: number;
  /** Most values an `enum` may list (each application compares a value with all of them). */
  readonly maxEnumValues: number;
  /**
   * Largest `maxItems` an array with `uniqueItems: true` must declare unless its `items` has only
   * scalar types (then ajv checks uniqueness in linear time; otherwise it compares every pair).
   */
  readonly maxUniqueItems: number;
  /** Most distinct value positions the analysis explores before it refuses the schema as too complex. */
  readonly maxAnalysisStates: number;
}

/**
 * The default budget (config `eventTypes.schemaMax*`; docs/publishing.md "Schema cost budget"). 256 applications
 * per value is 2.2× the most complex GitHub webhook schema (`pull_request`, 115); at 256 ajv validates
 * 800 KB of values in about 0.1 s.
 */
export const SCHEMA_COST_LIMITS: SchemaCostLimits = {
  maxApplicationsPerValue: 256,
  maxEnumValues: 1_000,
  maxUniqueItems: 100,
  maxAnalysisStates: 20_000,
};

/** The budget of the config's `eventTypes` section (the analysis state cap is not configurable). */
export function schemaCostLimitsOf(config: { readonly schemaMaxApplicationsPerValue: number; readonly schemaMaxEnumValues: number; readonly schemaMaxUniqueItems: number }): SchemaCostLimits {
  return { maxApplicationsPerValue: config.schemaMaxApplicationsPerValue, maxEnumValues: config.schemaMaxEnumValues, maxUniqueItems: config.schemaMaxUniqueItems, maxAnalysisStates: SCHEMA_COST_LIMITS.maxAnalysisStates };
}

/** What the analysis found: the worst number of subschema applications to one value of an event. */
export type SchemaCostResult = { readonly ok: true; readonly applicationsPerValue: number } | { readonly ok: false; readonly reason: string };

/**
 * Static checks of the schema's own keywords that are cheap and run before the draft-04 meta-schema
 * check (whose `uniqueItems` over `enum` compares every pair): `enum` sizes and `uniqueItems` bounds.
 * Walks every subschema once. @returns the first problem with its JSON pointer, or undefined
 */
export function keywordBoundProblem(schema: JsonObject, limits: SchemaCostLimits = SCHEMA_COST_LIMITS): string | undefined {
  let problem: string | undefined;
  walkSchema(schema, (node, pointer) => {
    if (problem !== undefined) return;
    const values = node.enum;
    if (Array.isArray(values) && values.length > limits.maxEnumValues) {
      problem = `${pointer}/enum: lists ${values.length} values, more than the limit of ${limits.maxEnumValues}`;
      return;
    }
    if (node.uniqueItems === true && !hasScalarItemTypes(node)) {
      const maxItems = node.maxItems;
      if (typeof maxItems !== 'number' || maxItems > limits.maxUniqueItems) {
        problem =
          `${pointer}/uniqueItems: an array with "uniqueItems" whose items are not all of scalar types must declare "maxItems" ` +
          `of at most ${limits.maxUniqueItems} (checking uniqueness compares every pair of items)`;
      }
    }
  });
  return problem;
}

/**
 * Whether ajv checks `uniqueItems` of this array schema in linear time: `items` is one schema whose
 * `type` names only scalar types (string, number, integer, boolean, null), as ajv's own test does.
 */
function hasScalarItemTypes(node: JsonObject): boolean {
  const items = node.items;
  if (!isJsonObject(items)) return false;
  const type = items.type;
  const types = typeof type === 'string' ? [type] : Array.isArray(type) ? type : [];
  return types.length > 0 && types.every((t) => typeof t === 'string' && t !== 'object' && t !== 'array');
}

/** Subschemas applied to one value, each with how many times it is applied (a multiset). */
type Applied = Map<JsonObject, number>;

/**
 * Bounds the work of validating any event against `schema`, so a hostile schema cannot make validation arbitrarily slow: for every position a
 * value can take in an event (a property name, an array index, at any depth), how many subschemas are
 * applied to that value, counting the same subschema again each time `$ref`, `allOf`, `anyOf`,
 * `oneOf`, `not` or a schema dependency applies it. Property names are matched against `properties`
 * exactly and against `patternProperties` with RE2; a name no `properties` lists is assumed to match
 * every pattern and `additionalProperties` at once (an upper bound).
 *
 * Refuses (with the position and the figure) when:
 * - a value could receive more than `maxApplicationsPerValue` applications (exponential `$ref` fan-out);
 * - `$ref`/combinators loop back to a subschema already applied to the same value (validation would
 *   never end);
 * - a `$ref` does not resolve within the document (ajv could not compile it either);
 * - more than `maxAnalysisStates` distinct positions would have to be explored.
 *
 * Recursion through the event (a `$ref` back to an ancestor via `properties` or `items`) is fine as
 * long as each value stays within the budget: the analysis stops at a position it has seen before.
 * Pure, iterative (no recursion on the schema's depth), at most `maxAnalysisStates` positions, each
 * costing at most `maxApplicationsPerValue` steps.
 */
export function analyseSchemaCost(schema: JsonObject, limits: SchemaCostLimits = SCHEMA_COST_LIMITS): SchemaCostResult {
  const analysis = new CostAnalysis(schema, limits);
  try {
    return { ok: true, applicationsPerValue: analysis.run() };
  } catch (error) {
    if (error instanceof CostRefusal) return { ok: false, reason: error.message };
    throw error;
  }
}

class CostRefusal extends Error {}

/** One position to explore: the subschemas applied there (before expansion) and where it is, for messages. */
interface Position {
  readonly applied: Applied;
  readonly path: string;
}

class CostAnalysis {
  /** Stable ids of subschemas, for the canonical key of a position. */
  private readonly ids = new Map<JsonObject, number>();
  private readonly seen = new Set<string>();
  /** Subschemas from which no `$ref`/combinator loop on the same value is reachable. */
  private readonly loopFree = new Set<JsonObject>();

  constructor(
    private readonly root: JsonObject,
    private readonly limits: SchemaCostLimits,
  ) {}

  /** @returns the worst applications per value @throws CostRefusal */
  run(): number {
    let worst = 0;
    const pending: Position[] = [{ applied: new Map([[this.root, 1]]), path: '#' }];
    for (let position = pending.pop(); position !== undefined; position = pending.pop()) {
      const expanded = this.expand(position);
      const key = this.keyOf(expanded);
      if (this.seen.has(key)) continue;
      this.seen.add(key);
      if (this.seen.size > this.limits.maxAnalysisStates) {
        throw new CostRefusal(`the schema is too complex to bound its validation cost (more than ${this.limits.maxAnalysisStates} distinct value positions)`);
      }
      let total = 0;
      for (const count of expanded.values()) total += count;
      worst = Math.max(worst, total);
      pending.push(...this.children(expanded, position.path));
    }
    return worst;
  }

  /**
   * Everything applied to the value at this position: the given subschemas and, transitively, those
   * they apply to the same value, with repetition. @throws CostRefusal over budget, on a loop, on an unresolvable `$ref`
   */
  private expand({ applied, path }: Position): Applied {
    const result: Applied = new Map();
    let total = 0;
    const stack: { node: JsonObject; count: number }[] = [...applied].map(([node, count]) => ({ node, count }));
    for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
      const { node, count } = next;
      total += count;
      if (total > this.limits.maxApplicationsPerValue) {
        throw new CostRefusal(
          `validating the value at ${path} of an event would apply more than ${this.limits.maxApplicationsPerValue} subschemas ` +
            `(through $ref, allOf, anyOf, oneOf, not or dependencies; the limit bounds validation time)`,
        );
      }
      result.set(node, (result.get(node) ?? 0) + count);
      this.requireNoLoopFrom(node, path);
      for (const child of this.sameValueChildren(node)) stack.push({ node: child, count });
    }
    return result;
  }

  /**
   * Refuses a loop of `$ref`/combinators reachable from `node` that never moves to another value
   * (depth-first with colours, iterative; each subschema is searched once over the whole analysis).
   * @throws CostRefusal
   */
  private requireNoLoopFrom(start: JsonObject, path: string): void {
    if (this.loopFree.has(start)) return;
    const open = new Set<JsonObject>([start]);
    const stack: { node: JsonObject; children: JsonObject[] }[] = [{ node: start, children: this.sameValueChildren(start) }];
    for (let top = stack.at(-1); top !== undefined; top = stack.at(-1)) {
      const child = top.children.pop();
      if (child === undefined) {
        stack.pop();
        open.delete(top.node);
        this.loopFree.add(top.node);
        continue;
      }
      if (this.loopFree.has(child)) continue;
      if (open.has(child)) throw new CostRefusal(`a $ref or combinator at ${path} applies a subschema to the same value again, so validation would never end`);
      open.add(child);
      stack.push({ node: child, children: this.sameValueChildren(child) });
    }
  }

  /** Subschemas a subschema applies to the value it is applied to. @throws CostRefusal on an unresolvable `$ref` */
  private sameValueChildren(node: JsonObject): JsonObject[] {
    const children: JsonObject[] = [];
    for (const keyword of SCHEMA_ARRAY_KEYWORDS) {
      const list = node[keyword];
      if (Array.isArray(list)) for (const sub of list) if (isJsonObject(sub)) children.push(sub);
    }
    if (isJsonObject(node.not)) children.push(node.not);
    if (isJsonObject(node.dependencies)) for (const dependency of Object.values(node.dependencies)) if (isJsonObject(dependency)) children.push(dependency);
    if (typeof node.$ref === 'string') children.push(this.resolve(node.$ref));
    return children;
  }

  /** The subschema a local `$ref` points at. @throws CostRefusal when it does not resolve */
  private resolve(ref: string): JsonObject {
    const resolved = resolveLocalRef(this.root, ref);
    if (!resolved.ok) throw new CostRefusal(resolved.problem);
    return resolved.schema;
  }

  /** The positions one level down: each property name the schemas mention, any other name, array items. */
  private children(applied: Applied, path: string): Position[] {
    const positions: Position[] = [];
    const names = new Set<string>();
    let tupleLength = 0;
    for (const node of applied.keys()) {
      if (isJsonObject(node.properties)) for (const name of Object.keys(node.properties)) names.add(name);
      if (Array.isArray(node.items)) tupleLength = Math.max(tupleLength, node.items.length);
    }
    for (const name of names) positions.push({ applied: this.propertyChild(applied, name), path: `${path}/${escapeSegment(name)}` });
    positions.push({ applied: this.propertyChild(applied, undefined), path: `${path}/*` });
    for (let index = 0; index <= tupleLength; index++) {
      positions.push({ applied: this.itemChild(applied, index), path: index < tupleLength ? `${path}/${index}` : `${path}/items` });
    }
    return positions.filter((p) => p.applied.size > 0);
  }

  /** What applies to the property `name` (undefined: a name no `properties` lists). */
  private propertyChild(applied: Applied, name: string | undefined): Applied {
    const child: Applied = new Map();
    for (const [node, count] of applied) {
      const declared = name !== undefined && isJsonObject(node.properties) ? node.properties[name] : undefined;
      if (declared !== undefined && Object.hasOwn(node.properties as JsonObject, name as string)) add(child, declared, count);
      let matchedPattern = false;
      if (isJsonObject(node.patternProperties)) {
        for (const [pattern, sub] of Object.entries(node.patternProperties)) {
          if (name === undefined || patternMatches(pattern, name)) {
            add(child, sub, count);
            matchedPattern = true;
          }
        }
      }
      const undeclared = declared === undefined && (name === undefined || !matchedPattern);
      if (undeclared) add(child, node.additionalProperties, count);
    }
    return child;
  }

  /** What applies to the array item at `index` (past every tuple: any further item). */
  private itemChild(applied: Applied, index: number): Applied {
    const child: Applied = new Map();
    for (const [node, count] of applied) {
      const items = node.items;
      if (Array.isArray(items)) add(child, index < items.length ? items[index] : node.additionalItems, count);
      else add(child, items, count);
    }
    return child;
  }

  /** A canonical text of a position's applications: equal positions are explored once. */
  private keyOf(applied: Applied): string {
    const parts: string[] = [];
    for (const [node, count] of applied) {
      let id = this.ids.get(node);
      if (id === undefined) {
        id = this.ids.size;
        this.ids.set(node, id);
      }
      parts.push(`${id}*${count}`);
    }
    return parts.sort().join(',');
  }
}

function add(applied: Applied, schema: JsonValue | undefined, count: number): void {
  if (isJsonObject(schema)) applied.set(schema, (applied.get(schema) ?? 0) + count);
}

/** Whether a `patternProperties` pattern matches a name (an invalid pattern counts as matching: an upper bound). */
function patternMatches(pattern: string, name: string): boolean {
  try {
    return new RE2(pattern, 'u').test(name);
  } catch {
    return true;
  }
}

function escapeSegment(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}
