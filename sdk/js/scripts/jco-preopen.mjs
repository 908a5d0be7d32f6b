// `jco types` 1.35.0 runs its WIT parser as a Wasm component on preview2-shim 0.26, which
// starts with no preopened directories, so reading any WIT path fails with "No such file or
// directory (os error 44)" (the same error makes `jco componentize` fail). Preloaded with
// `node --import`, this grants that shim instance the root directory before jco runs.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const modules = join(dirname(fileURLToPath(import.meta.url)), '../node_modules/@bytecodealliance');
const transpile = join(modules, 'jco-transpile');
const candidates = [
  join(transpile, 'node_modules/@bytecodealliance/preview2-shim/dist/nodejs/filesystem.js'),
  join(transpile, '../preview2-shim/dist/nodejs/filesystem.js'),
];
const shim = candidates.find(existsSync);
if (!shim) {
  console.error('jco-preopen: preview2-shim of jco-transpile not found; jco may fail to read WIT');
} else {
  const { _setPreopens } = await import(pathToFileURL(shim).href);
  _setPreopens({ '/': '/' });
}
