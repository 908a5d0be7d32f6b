// Lets the SDK's modules, and plugins using them, load under plain Node for unit tests: the
// component imports `orchard:actuator/log` and `orchard:actuator/report` resolve to stubs that
// record into `globalThis.orchardLogs` (`[level, message]`) and `globalThis.orchardReports`
// (`report.take()` reads it); `orchard-sdk` resolves to this SDK's `src/index.js`.
import { register } from 'node:module';

globalThis.orchardLogs = [];
globalThis.orchardReports = { connectionDetails: [], drifts: [] };
const SDK = new URL('../src/index.js', import.meta.url).href;
register(
  'data:text/javascript,' +
    encodeURIComponent(`
const STUBS = {
  'orchard:actuator/log': 'export function log(level, message) { globalThis.orchardLogs.push([level, message]); }',
  'orchard:actuator/report': 'export function connectionDetail(key, value) { globalThis.orchardReports.connectionDetails.push([key, value]); }\\n' +
    'export function drift(field, observed, desired, sensitive) { globalThis.orchardReports.drifts.push({ field, observed, desired, sensitive }); }',
};
export async function resolve(specifier, context, next) {
  const stub = Object.keys(STUBS).find((s) => specifier === s || specifier.startsWith(s + '@'));
  if (stub) return { url: 'data:text/javascript,' + encodeURIComponent(STUBS[stub]), shortCircuit: true };
  if (specifier === 'orchard-sdk') return { url: ${JSON.stringify(SDK)}, shortCircuit: true };
  return next(specifier, context);
}`),
);
