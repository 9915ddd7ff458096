/** What "Run as Paddle job…" on a file-browser item fills into the New job form. */
import { PathExt } from '@jupyterlab/coreutils';

/** Values to start the form with instead of the defaults (file browser, context menu). */
export type IFormPrefill = { [field: string]: string };

/** A folder is the trainer package; a `.py` file is the entry point of its folder. */
export function prefillFor(path: string, isDirectory: boolean): IFormPrefill {
  if (isDirectory) {
    return { trainer_package: path || '.' };
  }
  return {
    trainer_package: PathExt.dirname(path) || '.',
    entry_point: `python ${PathExt.basename(path)}`
  };
}
