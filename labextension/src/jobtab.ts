/**
 * The job view as a main-area tab, and its actions as JupyterLab dialogs and notifications
 * (kept apart from `jobview.ts` so the view itself is plain DOM and unit-testable).
 */
import { Clipboard, Dialog, MainAreaWidget, Notification, showDialog } from '@jupyterlab/apputils';

import { ApiError, PaddleApi } from './api';
import { __ } from './i18n';
import { IJobActions, IJobViewOptions, JobView } from './jobview';
import { IJobStatus } from './types';

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
        Notification.error(__('Could not cancel %1: %2', name, (error as ApiError).message), {
          autoClose: 8000
        });
        return null;
      }
    },
    async remove(name: string, running: boolean): Promise<boolean> {
      const result = await showDialog({
        title: __('Delete job %1?', name),
        body:
          (running ? __('The job is stopped first.') + ' ' : '') +
          __('Its record, logs and package snapshot are removed. This cannot be undone.'),
        buttons: [
          Dialog.cancelButton({ label: __('Keep') }),
          Dialog.warnButton({ label: __('Delete') })
        ]
      });
      if (!result.button.accept) {
        return false;
      }
      try {
        await api.remove(name);
        return true;
      } catch (error) {
        Notification.error(__('Could not delete %1: %2', name, (error as ApiError).message), {
          autoClose: 8000
        });
        return false;
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
