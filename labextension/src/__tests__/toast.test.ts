import { describe, expect, it } from 'vitest';

import { TOAST_LIMIT, sentences, toastText } from '../logic/toast';

const DETAIL =
  "job 'ckpt-cancel-and-resume-run' has no checkpoints to resume from. The training code saves them with paddle_nbext_job.save_checkpoint; resume a job that saved one.";

describe('toast words', () => {
  it('split into sentences, keeping dotted names whole', () => {
    expect(sentences(DETAIL)).toEqual([
      "job 'ckpt-cancel-and-resume-run' has no checkpoints to resume from.",
      'The training code saves them with paddle_nbext_job.save_checkpoint; resume a job that saved one.'
    ]);
  });

  it('keep a short message whole', () => {
    expect(toastText('Could not cancel a', 'job a is gone.')).toEqual({
      text: 'Could not cancel a: job a is gone.',
      shortened: false
    });
  });

  it('never cut a sentence: a long detail keeps its whole first sentences only', () => {
    const { text, shortened } = toastText('Could not resume ckpt-cancel-and-resume-run', DETAIL);
    expect(shortened).toBe(true);
    expect(text.length).toBeLessThanOrEqual(TOAST_LIMIT);
    expect(text).toBe(
      "Could not resume ckpt-cancel-and-resume-run: job 'ckpt-cancel-and-resume-run' has no checkpoints to resume from."
    );
    expect(toastText('Paddle job x failed', 'y'.repeat(200))).toEqual({
      text: 'Paddle job x failed.',
      shortened: true
    });
  });
});
