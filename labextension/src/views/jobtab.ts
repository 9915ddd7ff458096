/**
 * The job view as a main-area tab, and its actions as JupyterLab dialogs and notifications
 * (kept apart from `jobview.ts` so the view itself is plain DOM and unit-testable).
 */
import { Clipboard, Dialog, MainAreaWidget, Notification, showDialog } from '@jupyterlab/apputils';

import { ApiError, PaddleApi } from '../api/client';
import { __ } from '../i18n';
import { IJobActions, IJobViewOptions, JobView } from './jobview';
import { bytesText } from '../logic/format';
import { toastText } from '../logic/toast';
import { ICheckpoints, IJobStatus } from '../api/types';

/**
 * A failure as a toast of whole sentences; when the server's words do not all fit, a Details
 * button shows them whole (JupyterLab would cut the toast at 140 characters, mid-word).
 */
export function notifyFailure(lead: string, error: unknown): void {
  const detail = (error as ApiError).message ?? String(error);
  const { text, shortened } = toastText(lead, detail);
  Notification.error(text, {
    autoClose: shortened ? false : 8000,
    actions: shortened
      ? [
          {
            label: __('Details'),
            callback: () =>
              void showDialog({
                title: lead,
                body: detail,
                buttons: [Dialog.okButton({ label: __('Close') })]
              })
          }
        ]
      : []
  });
}

/** Cancel and delete ask first; failures become a notification in words. */
export function jobActions(api: PaddleApi): IJobActions {
  return {
    async cancel(name: string): Promise<IJobStatus | null> {
      const result = await showDialog({
        title: __('Cancel job %1?', name),
        body: __(
          'Every replica is stopped. The job record and its logs are kept until you delete it.'
        ),
        buttons: [
          Dialog.cancelButton({ label: __('Keep running') }),
          Dialog.warnButton({ label: __('Cancel job') })
        ]
      });
      if (!result.button.accept) {
        return null;
      }
      try {
        return await api.cancel(name);
      } catch (error) {
        notifyFailure(__('Could not cancel %1', name), error);
        return null;
      }
    },
    async remove(name: string, running: boolean): Promise<boolean> {
      let sizes: ICheckpoints | null = null;
      try {
        sizes = await api.checkpoints(name);
      } catch {
        sizes = null; // a server before checkpoints: the dialog says nothing of sizes
      }
      const hasCheckpoints = !!sizes && sizes.checkpoints.length > 0;
      const result = await showDialog({
        title: __('Delete job %1?', name),
        body:
          (running ? __('The job is stopped first.') + ' ' : '') +
          __(
            'Its record, logs, package snapshot and checkpoints are removed. This cannot be undone.'
          ) +
          (sizes ? ' ' + __('This frees %1.', bytesText(sizes.job_size)) : '') +
          (hasCheckpoints && sizes
            ? ' ' +
              __(
                '"Delete, keep checkpoints" moves its %1 checkpoints (%2) to ~/paddle-checkpoints/ first.',
                sizes.checkpoints.length,
                bytesText(sizes.size)
              )
            : ''),
        buttons: [
          Dialog.cancelButton({ label: __('Keep') }),
          ...(hasCheckpoints
            ? [Dialog.warnButton({ label: __('Delete, keep checkpoints'), actions: ['keep'] })]
            : []),
          Dialog.warnButton({ label: __('Delete') })
        ]
      });
      if (!result.button.accept) {
        return false;
      }
      const keep = result.button.actions.includes('keep');
      try {
        const kept = await api.remove(name, keep);
        if (kept) {
          Notification.info(__('Checkpoints of %1 kept in %2.', name, kept.kept), {
            autoClose: 8000
          });
        }
        return true;
      } catch (error) {
        notifyFailure(__('Could not delete %1', name), error);
        return false;
      }
    },
    async resume(job: IJobStatus): Promise<IJobStatus | null> {
      const result = await showDialog({
        title: __('Resume job %1?', job.name),
        body: __(
          'A new job with the same spec starts from its latest checkpoint; %1 stays as it is.',
          job.name
        ),
        buttons: [
          Dialog.cancelButton({ label: __('Not now') }),
          Dialog.okButton({ label: __('Resume') })
        ]
      });
      if (!result.button.accept) {
        return null;
      }
      try {
        const resumed = await api.resume(job.name);
        Notification.success(
          __('Resumed %1 as %2 from step %3.', job.name, resumed.name, resumed.resumed_from.step),
          { autoClose: 5000 }
        );
        return resumed;
      } catch (error) {
        notifyFailure(__('Could not resume %1', job.name), error);
        return null;
      }
    },
    copySpec(job: IJobStatus): void {
      Clipboard.copyToSystem(JSON.stringify(job.spec, null, 2));
      Notification.info(__('Spec of %1 copied to the clipboard.', job.name), { autoClose: 3000 });
    }
  };
}

/** The main-area tab of one job: can be dragged, split and restored. */
export class JobViewWidget extends MainAreaWidget<JobView> {
  constructor(options: IJobViewOptions) {
    super({ content: new JobView(options) });
    this.id = `paddle-nbext-job-${options.job.name}`;
    this.addClass('pn-job-tab');
    this.title.closable = true;
  }
}
