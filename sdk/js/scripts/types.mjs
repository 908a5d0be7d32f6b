// `npm run types [-- ARGS]`: TypeScript declarations of the WIT worlds into `types/` with
// `jco types` (through jco-preopen.mjs, which lets jco read the WIT): world
// `shortcut-actuator-plugin`, the one the build targets (`types/shortcut-actuator-plugin.d.ts`,
// with `interfaces/orchard-shortcuts-shortcuts.d.ts`), and `versioned-actuator-plugin` and
// `actuator-plugin`, which it includes. ARGS (e.g. `--quiet`) go to each run.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SDK = join(dirname(fileURLToPath(import.meta.url)), '..');
const jco = join(SDK, 'node_modules/@bytecodealliance/jco/dist/jco.js');
for (const world of ['actuator-plugin', 'versioned-actuator-plugin', 'shortcut-actuator-plugin']) {
  const args = ['--import', join(SDK, 'scripts/jco-preopen.mjs'), jco, 'types', join(SDK, '../../wit'),
    '--world-name', `orchard:actuator/${world}`, '-o', join(SDK, 'types'), ...process.argv.slice(2)];
  const { status } = spawnSync(process.execPath, args, { stdio: 'inherit' });
  if (status !== 0) process.exit(status ?? 1);
}
