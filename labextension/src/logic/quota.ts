/**
 * The New job form's quota check, without DOM: on a backend that checks quota
 * (`backend.quota_check`: Kubernetes) a valid form asks the server's dry run, a moment after the
 * last edit, what the namespace's ResourceQuota and the job's ClusterQueue have free.  This
 * module decides when to ask, drops an answer about values edited since, and keeps the verdict
 * that decides whether Submit is allowed; the form only shows the sentence.
 */
import { IBackendInfo, IDryRun, IQuotaCheck } from '../api/types';

/** Milliseconds after the last edit before the form asks the server about quota. */
export const QUOTA_CHECK_DELAY = 700;

/** What the quota says of a job: it fits, it will wait, it can never run, or it is unknown. */
export type QuotaLevel = IQuotaCheck['verdict'];

/** Every level, each a class of the quota line (`pn-quota-<level>`). */
export const QUOTA_LEVELS: readonly QuotaLevel[] = ['fits', 'waits', 'never', 'unknown'];

/** The quota line: the server's sentence and its level. */
export interface IQuotaNote {
  text: string;
  level: QuotaLevel;
}

/** Whether the backend answers dry runs with a quota check (`backend.quota_check`). */
export function checksQuota(backend: IBackendInfo | null | undefined): boolean {
  return backend?.quota_check === true;
}

/**
 * The quota line: the server's sentence, and its level (`fits`, `waits`: a warning, `never`:
 * an error that disables Submit, `unknown`: quota could not be read); null without a check.
 */
export function quotaNote(check: IQuotaCheck | null | undefined): IQuotaNote | null {
  if (!check || typeof check.words !== 'string' || !check.words) {
    return null;
  }
  return {
    text: check.words,
    level: QUOTA_LEVELS.includes(check.verdict) ? check.verdict : 'unknown'
  };
}

/** `QuotaCheck.ask`'s answer when the values were edited while it was on its way. */
export const STALE = Symbol('stale quota answer');

/**
 * One form's quota check: the timer that waits out quick edits, the count of questions asked
 * (an answer to an older one is stale), and the last verdict.
 */
export class QuotaCheck {
  /** Whether this backend checks quota (set when the form is rebuilt). */
  enabled = false;
  private _timer: ReturnType<typeof setTimeout> | null = null;
  /** Numbers the questions; an answer to an older one (values edited since) is dropped. */
  private _asked = 0;
  private _verdict: QuotaLevel | null = null;

  /** The level of the last answer shown; null while none is. */
  get verdict(): QuotaLevel | null {
    return this._verdict;
  }

  /** A job the quota can never fit is refused by the server: no Submit until the values change. */
  get blocksSubmit(): boolean {
    return this._verdict === 'never';
  }

  /** Ask `QUOTA_CHECK_DELAY` ms from now by calling `run` (nothing when quota is not checked). */
  schedule(run: () => void): void {
    if (!this.enabled) {
      return;
    }
    this._timer = setTimeout(() => {
      this._timer = null;
      run();
    }, QUOTA_CHECK_DELAY);
  }

  /** Drop a question still waiting for its moment. */
  cancelTimer(): void {
    if (this._timer !== null) {
      clearTimeout(this._timer);
      this._timer = null;
    }
  }

  /** The values changed: no question waits, an answer still on its way is stale, no verdict. */
  clear(): void {
    this.cancelTimer();
    this._asked++;
    this._verdict = null;
  }

  /**
   * Ask the dry run and read its quota check: the note to show (null: nothing to say, also when
   * the dry run failed), or `STALE` when the values were edited while it was on its way.
   */
  async ask(dryRun: () => Promise<IDryRun>): Promise<IQuotaNote | null | typeof STALE> {
    const asked = ++this._asked;
    let check: IQuotaCheck | null = null;
    try {
      check = (await dryRun()).quota ?? null;
    } catch {
      check = null;
    }
    if (asked !== this._asked) {
      return STALE;
    }
    const note = quotaNote(check);
    this._verdict = note?.level ?? null;
    return note;
  }
}
