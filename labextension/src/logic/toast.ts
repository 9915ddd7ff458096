/**
 * Toast words that are never cut mid-sentence.  JupyterLab truncates a notification's message
 * at 140 characters, wherever that falls ("…the job has no checkp…").  So a toast says its lead
 * and as many whole sentences of the detail as fit; the caller offers the whole detail
 * elsewhere (a Details dialog, the job's view).
 */

/** What JupyterLab's notifications show of a message. */
export const TOAST_LIMIT = 140;

export interface IToastText {
  /** What the toast says: whole sentences only. */
  text: string;
  /** Whether part of the detail was left out. */
  shortened: boolean;
}

/** The detail's sentences: each ends at `.`, `!` or `?` followed by a space (or the end). */
export function sentences(detail: string): string[] {
  return detail
    .split(/(?<=[.!?])\s+/)
    .map(sentence => sentence.trim())
    .filter(Boolean);
}

/**
 * `lead: detail` when that fits in `limit`; else the lead and the detail's first whole
 * sentences that fit, else the lead alone (ending with a full stop).
 */
export function toastText(lead: string, detail: string, limit = TOAST_LIMIT): IToastText {
  const whole = detail.trim() ? `${lead}: ${detail.trim()}` : lead;
  if (whole.length <= limit) {
    return { text: whole, shortened: false };
  }
  let text = '';
  for (const sentence of sentences(detail)) {
    const next = `${text ? text + ' ' : `${lead}: `}${sentence}`;
    if (next.length > limit) {
      break;
    }
    text = next;
  }
  if (!text) {
    text = /[.!?]$/.test(lead) ? lead : `${lead}.`;
  }
  return { text, shortened: true };
}
