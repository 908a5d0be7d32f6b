// Builds a JavaScript plugin folder into an Orchard actuator component:
//
//   node sdk/js/build.mjs <plugin-dir> <out.wasm>      (or sdk/js/build.sh, the same)
//
// 1. bundles `<plugin-dir>/app.js` and what it imports (`orchard-sdk` is this SDK) into one
//    ES module with rolldown; `orchard:*` and `wasi:*` imports stay imports of the component.
//    The bundle's entry exports app.js's `actuator` and, as `conversion`, app.js's own
//    `conversion` export if it has one, else the one `exportActuator` made (`versions()` = []
//    for a plugin that declares no versions: one version, as before 0.1.2); as `shortcuts`,
//    likewise (none for a plugin that declares none: the generic flow);
// 2. componentizes the bundle against `wit/` (world orchard:actuator/shortcut-actuator-plugin:
//    actuator-plugin plus the conversion and shortcuts exports) with componentize-js, the
//    versions pinned in package-lock.json.
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { componentize } from '@bytecodealliance/componentize-js';
import { rolldown } from 'rolldown';

const SDK = dirname(fileURLToPath(import.meta.url));
const WIT = resolve(SDK, '../../wit');
const WORLD = 'orchard:actuator/shortcut-actuator-plugin';

const [pluginDir, out] = process.argv.slice(2);
if (!pluginDir || !out) {
  console.error('usage: build.sh <plugin-dir> <out.wasm>');
  process.exit(2);
}
const entry = resolve(pluginDir, 'app.js');
if (!existsSync(entry)) {
  console.error(`error: ${entry} does not exist`);
  process.exit(1);
}

const work = await mkdtemp(join(tmpdir(), 'orchard-js-'));
try {
  // The component's exports: `actuator`, `conversion` and `shortcuts` (see above).
  const main = join(work, 'main.js');
  await writeFile(
    main,
    `import * as app from ${JSON.stringify(entry)};\n` +
      `import { conversionOf, shortcutsExportOf } from ${JSON.stringify(join(SDK, 'src/actuator.js'))};\n` +
      `export const actuator = app.actuator;\n` +
      `export const conversion = conversionOf(app);\n` +
      `export const shortcuts = shortcutsExportOf(app);\n`,
  );
  const bundle = await rolldown({
    input: main,
    external: [/^orchard:/, /^wasi:/],
    resolve: { alias: { 'orchard-sdk': join(SDK, 'src/index.js') } },
    logLevel: 'warn',
  });
  const source = join(work, 'app.js');
  await bundle.write({ file: source, format: 'esm' });
  await bundle.close();

  const { component } = await componentize({ sourcePath: source, witPath: WIT, worldName: WORLD });
  const target = resolve(out);
  await mkdir(dirname(target), { recursive: true });
  await writeFile(`${target}.tmp`, component);
  await rename(`${target}.tmp`, target);
  const { size } = await stat(target);
  console.error(`built ${out} (${(size / 1048576).toFixed(1)} MiB)`);
} finally {
  await rm(work, { recursive: true, force: true });
}
