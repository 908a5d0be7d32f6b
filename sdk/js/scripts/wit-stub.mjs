// Lets the SDK's modules load under plain Node for unit tests: `orchard:actuator/log` (a
// component import) resolves to a stub that records the lines in `globalThis.orchardLogs`.
import { register } from 'node:module';

globalThis.orchardLogs = [];
register(
  'data:text/javascript,' +
    encodeURIComponent(`
export async function resolve(specifier, context, next) {
  if (specifier.startsWith('orchard:actuator/log')) {
    return { url: 'data:text/javascript,' + encodeURIComponent(
      'export function log(level, message) { globalThis.orchardLogs.push([level, message]); }'
    ), shortCircuit: true };
  }
  return next(specifier, context);
}`),
);
