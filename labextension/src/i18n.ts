/**
 * The panel's strings go through JupyterLab's `ITranslator` (domain `paddle_nbext`).
 *
 * One bundle for the whole extension, set once at activation: every view calls `__()` so a
 * language pack translates the list, the job view and the form alike, and views built before
 * activation (tests) read English through the null translator.
 */
import { ITranslator, TranslationBundle, nullTranslator } from '@jupyterlab/translation';

export const TRANSLATION_DOMAIN = 'paddle_nbext';

let bundle: TranslationBundle = nullTranslator.load(TRANSLATION_DOMAIN);

/** Use the application's translator from now on. */
export function setTranslator(translator: ITranslator | null): void {
  bundle = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
}

/** A translated string; `%1`, `%2`… are replaced by the arguments. */
export function __(text: string, ...args: Array<string | number>): string {
  return bundle.__(text, ...args);
}

/** A translated singular/plural pair chosen by `count` (`%1` is the count). */
export function _n(
  singular: string,
  plural: string,
  count: number,
  ...args: Array<string | number>
): string {
  return bundle._n(singular, plural, count, ...args);
}
