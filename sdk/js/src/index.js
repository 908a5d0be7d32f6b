// orchard-sdk for JavaScript: write an Orchard actuator as a WebAssembly component with
// componentize-js.
//
//   import { Actuator, exportActuator, http, report, Status } from 'orchard-sdk';
//   class User extends Actuator { ... }        // optional: versions() and convert()
//   export const actuator = exportActuator(User);
//
// Schemas may be written with TypeBox (`Type`, re-exported from `@sinclair/typebox`).
//
// Build with `sdk/js/build.sh <plugin-dir> <out.wasm>` (it bundles `app.js` with this SDK and
// componentizes the bundle against `wit/`).

export { Actuator, exportActuator } from './actuator.js';
export { Type } from './schema.js';
export * as schema from './schema.js';
export { Failure, InvalidConfiguration, Transient, Unrecoverable, fromException } from './errors.js';
export { ResourceHandler, ensure } from './handler.js';
export { Availability, ManagedObject, Status, WaitEvent, guardedDependency, testConvertible, testObject, testResource } from './types.js';
export * as http from './http.js';
export * as log from './log.js';
export * as report from './report.js';
