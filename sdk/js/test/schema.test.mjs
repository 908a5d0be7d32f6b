// Unit tests of the SDK's schema helpers (TypeBox, re-exported), under plain Node.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Actuator, Type, exportActuator, schema } from '../src/index.js';

class OneVersion extends Actuator {
  describe() {
    return { name: 'one', group: 'example.dev', version: 'v1', kind: 'One', plural: 'ones', resourceSchema: { type: 'object' }, observedSchema: { type: 'object' } };
  }
}

test('schema helpers: TypeBox types are the JSON Schema the host receives', () => {
  const t = Type.Object({
    name: Type.String({ maxLength: 9, ...schema.immutable('name is immutable') }),
    definition: Type.Optional(schema.freeForm()),
    labels: Type.Optional(schema.map(Type.String(), { maxProperties: 4 })),
  });
  assert.deepStrictEqual(schema.jsonSchema(t), {
    type: 'object',
    required: ['name'],
    properties: {
      name: { type: 'string', maxLength: 9, 'x-kubernetes-validations': [{ rule: 'self == oldSelf', message: 'name is immutable' }] },
      definition: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
      labels: { type: 'object', additionalProperties: { type: 'string' }, maxProperties: 4 },
    },
  });
  assert.deepEqual(schema.fields(t), ['name', 'definition', 'labels']);
  assert.deepEqual(schema.jsonSchema('{"type":"string"}'), { type: 'string' });
  assert.equal(exportActuator(class extends OneVersion {
    describe() {
      return { ...super.describe(), resourceSchema: t };
    }
  }).describe().resourceSchema, JSON.stringify(schema.jsonSchema(t)));
});
