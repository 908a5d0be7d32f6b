// The `orchard:shortcuts/shortcuts` export (world shortcut-actuator-plugin, which the build
// always targets): what `exportActuator` makes of `Actuator.shortcuts`, and what the build
// exports for a module.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { shortcutsExportOf } from '../src/actuator.js';
import { Actuator, exportActuator } from '../src/index.js';

class Plain extends Actuator {}

class Synchronous extends Actuator {
  shortcuts() {
    return { deleteIsSynchronous: true };
  }
}

class AsProperty extends Actuator {
  get shortcuts() {
    return { createRefusesDuplicates: true, deleteIsSynchronous: false };
  }
}

test('an actuator declares no shortcut by default', () => {
  const a = exportActuator(Plain);
  assert.deepEqual(a.shortcuts.shortcuts(), { createRefusesDuplicates: false, deleteIsSynchronous: false });
  assert.ok(!Object.keys(a).includes('shortcuts'), 'the actuator export keeps its interface alone');
});

test('shortcuts are read from a method or a property, every flag answered', () => {
  assert.deepEqual(exportActuator(Synchronous).shortcuts.shortcuts(), {
    createRefusesDuplicates: false,
    deleteIsSynchronous: true,
  });
  assert.deepEqual(exportActuator(AsProperty).shortcuts.shortcuts(), {
    createRefusesDuplicates: true,
    deleteIsSynchronous: false,
  });
});

test('a declaration that is not a shortcut, or not a boolean, traps naming it', () => {
  class Misspelt extends Actuator {
    shortcuts() {
      return { deleteIsSync: true };
    }
  }
  class NotBoolean extends Actuator {
    shortcuts() {
      return { deleteIsSynchronous: 'yes' };
    }
  }
  assert.throws(() => exportActuator(Misspelt).shortcuts.shortcuts(), /Misspelt.shortcuts: "deleteIsSync" is not a shortcut/);
  assert.throws(() => exportActuator(NotBoolean).shortcuts.shortcuts(), /NotBoolean.shortcuts.deleteIsSynchronous must be true or false, got "yes"/);
});

test("the build exports the module's own shortcuts, else the actuator's, else none", () => {
  const a = exportActuator(Synchronous);
  assert.equal(shortcutsExportOf({ actuator: a }), a.shortcuts);
  const own = { shortcuts: () => ({ createRefusesDuplicates: true, deleteIsSynchronous: true }) };
  assert.equal(shortcutsExportOf({ actuator: a, shortcuts: own }), own);
  assert.deepEqual(shortcutsExportOf({ actuator: {} }).shortcuts(), { createRefusesDuplicates: false, deleteIsSynchronous: false });
});
