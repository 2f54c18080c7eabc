/**
 * The subset of Avro schema JSON (Avro specification 1.11, "Schema Declaration") the broker's envelope
 * schemas use. A schema is a primitive type name, a reference to a named type defined earlier in the
 * same document (by full name), a complex type, or a union (a JSON array of schemas). A bare string is
 * a primitive type name ({@link AvroPrimitive}) or such a reference.
 */
export type AvroSchema = string | AvroRecord | AvroEnum | AvroArray | AvroMap | AvroLogical | readonly AvroSchema[];

/** Avro's primitive type names. */
export type AvroPrimitive = 'null' | 'boolean' | 'int' | 'long' | 'float' | 'double' | 'bytes' | 'string';

/** A primitive annotated with a logical type, e.g. `{"type": "string", "logicalType": "uuid"}`. */
export interface AvroLogical {
  readonly type: AvroPrimitive;
  readonly logicalType: string;
}

/** A named record type; `name` plus `namespace` form its full name. */
export interface AvroRecord {
  readonly type: 'record';
  readonly name: string;
  readonly namespace?: string;
  readonly doc?: string;
  readonly fields: readonly AvroField[];
}

/** One field of a record; optional fields are a union with `"null"` first and `default: null`. */
export interface AvroField {
  readonly name: string;
  readonly type: AvroSchema;
  readonly doc?: string;
  readonly default?: null | string | number | boolean;
}

/** A named enumeration. */
export interface AvroEnum {
  readonly type: 'enum';
  readonly name: string;
  readonly namespace?: string;
  readonly doc?: string;
  readonly symbols: readonly string[];
}

/** An array of `items`. */
export interface AvroArray {
  readonly type: 'array';
  readonly items: AvroSchema;
}

/** A map from string keys to `values`. */
export interface AvroMap {
  readonly type: 'map';
  readonly values: AvroSchema;
}
