/**
 * "Delete ended…" of the job list: one question for many jobs, saying how many and what that
 * frees (the sum of each job's `job_size`), then one delete per job; what could not be deleted
 * is said in a notification of whole sentences.
 */
import { Dialog, Notification, showDialog } from '@jupyterlab/apputils';

import { PaddleApi } from '../api/client';
import { bytesText } from '../logic/format';
import { __ } from '../i18n';
import { notifyFailure } from './jobtab';

/** Requests at a time while sizing or deleting (hundreds of jobs must not flood the server). */
const AT_ONCE = 6;

async function eachLimited<T>(
  items: readonly T[],
  work: (item: T) => Promise<void>
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      await work(items[next++]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(AT_ONCE, items.length) }, worker));
}

/** Ask once, then delete `names`; the names deleted. */
export async function deleteJobs(api: PaddleApi, names: readonly string[]): Promise<string[]> {
  if (!names.length) {
    Notification.info(__('No ended job is shown: nothing to delete.'), { autoClose: 4000 });
    return [];
  }
  let bytes = 0;
  let sized = true;
  await eachLimited(names, async name => {
    try {
      bytes += (await api.checkpoints(name)).job_size;
    } catch {
      sized = false;
    }
  });
  const listed = names.slice(0, 5).join(', ') + (names.length > 5 ? ', …' : '');
  const result = await showDialog({
    title:
      names.length === 1 ? __('Delete 1 ended job?') : __('Delete %1 ended jobs?', names.length),
    body:
      `${listed}. ` +
      __(
        'Their records, logs, package snapshots and checkpoints are removed. This cannot be undone.'
      ) +
      ' ' +
      (sized
        ? __('This frees %1.', bytesText(bytes))
        : __('This frees at least %1.', bytesText(bytes))),
    buttons: [
      Dialog.cancelButton({ label: __('Keep') }),
      Dialog.warnButton({
        label: names.length === 1 ? __('Delete 1 job') : __('Delete %1 jobs', names.length)
      })
    ]
  });
  if (!result.button.accept) {
    return [];
  }
  const deleted: string[] = [];
  const failed: string[] = [];
  await eachLimited(names, async name => {
    try {
      await api.remove(name);
      deleted.push(name);
    } catch {
      failed.push(name);
    }
  });
  if (failed.length) {
    notifyFailure(
      __('Could not delete %1 of %2 jobs', failed.length, names.length),
      new Error(failed.join(', '))
    );
  } else {
    Notification.success(__('Deleted %1 jobs, freeing %2.', deleted.length, bytesText(bytes)), {
      autoClose: 5000
    });
  }
  return deleted;
}
