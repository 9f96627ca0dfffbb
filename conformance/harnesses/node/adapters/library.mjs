// A JavaScript library as Node would find it from the directory ctxkit runs in (its
// node_modules or a parent's), so adapters use the user's installed version, not one of ours.

import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

/** `import(specifier)` resolved from the current directory; a clear error naming `pkg` when it
 * is not installed there. */
export async function importFromHere(specifier, pkg) {
  const require = createRequire(`${process.cwd()}/`);
  let path;
  try {
    path = require.resolve(specifier);
  } catch {
    throw new Error(
      `${pkg} is not installed where ctxkit runs (${process.cwd()}): run \`npm install ${pkg}\` in this directory`,
    );
  }
  return import(pathToFileURL(path).href);
}
