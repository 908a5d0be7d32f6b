// Schemas from TypeBox (`@sinclair/typebox`, pinned in package.json): `Type.Object(...)`,
// `Type.String(...)`… build JSON Schema objects directly, which `describe` and `versions`
// take as they are (the SDK serialises them; TypeBox's own keys are symbols, which JSON leaves
// out). Options are copied into the schema as given, so Kubernetes' extensions go there too:
//
//   import { Type, schema } from 'orchard-sdk';
//   const Spec = Type.Object({
//     name: Type.String({ minLength: 1, ...schema.immutable('name is immutable') }),
//     tags: Type.Optional(Type.Array(Type.String(), { maxItems: 16 })),
//   });
//   // describe(): { …, resourceSchema: Spec, … }
//
// A property is required unless wrapped in `Type.Optional`. Keep to what a CRD's structural
// OpenAPI v3 schema accepts: `Type.String({ enum: [...] })` rather than `Type.Union` of
// literals (`anyOf`/`const`), `freeForm()` for objects of any shape and `map(values)` rather
// than `Type.Record` (`patternProperties`); no `Type.Null`, `Type.Date`, `Type.Uint8Array`.

import { Type } from '@sinclair/typebox';

export { Type };

/**
 * The option that makes a field immutable (a CEL rule `self == oldSelf`), to spread into a
 * TypeBox type's options: `Type.String({ maxLength: 255, ...schema.immutable() })`.
 */
export function immutable(message = 'immutable') {
  return { 'x-kubernetes-validations': [{ rule: 'self == oldSelf', message }] };
}

/** A schema (TypeBox's or any object) as plain JSON: what the host receives. */
export function jsonSchema(schema) {
  return typeof schema === 'string' ? JSON.parse(schema) : JSON.parse(JSON.stringify(schema));
}

/** The property names of an object schema: e.g. to refuse unknown fields in `parseSpec`. */
export function fields(schema) {
  return Object.keys(jsonSchema(schema).properties ?? {});
}

/**
 * An object of any shape, kept as it is (`x-kubernetes-preserve-unknown-fields`), e.g. a
 * policy's `definition`. (`Type.Object({}, …)` would add an empty `properties`.)
 */
export function freeForm(options = {}) {
  return Type.Unsafe({ type: 'object', 'x-kubernetes-preserve-unknown-fields': true, ...options });
}

/** An object whose keys are free and whose values are `values` (`additionalProperties`). */
export function map(values, options = {}) {
  return Type.Unsafe({ type: 'object', additionalProperties: values, ...options });
}
