/**
 * paddle-nbext JupyterLab / Notebook 7 extension: the "Paddle jobs" left-sidebar panel.
 *
 * `ILabShell` is not required, so the same plugin works in Notebook 7 (whose shell also has a
 * left area).  The job stream starts at activation, so notifications arrive and jobs submitted
 * from a notebook show up even before the panel is first opened.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, Notification } from '@jupyterlab/apputils';
import { ILauncher } from '@jupyterlab/launcher';
import { ISettingRegistry } from '@jupyterlab/settingregistry';

import { PaddleApi } from './api';
import { JobsModel } from './model';
import { PaddlePanel, paddleIcon } from './panel';

const PLUGIN_ID = 'paddle-nbext-labextension:plugin';

export const CommandIDs = {
  open: 'paddle-nbext:open',
  newJob: 'paddle-nbext:new-job'
} as const;

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Sidebar panel for distributed PaddlePaddle jobs (paddle-nbext).',
  autoStart: true,
  optional: [ISettingRegistry, ICommandPalette, ILauncher],
  activate: (
    app: JupyterFrontEnd,
    settingRegistry: ISettingRegistry | null,
    palette: ICommandPalette | null,
    launcher: ILauncher | null
  ): void => {
    const api = new PaddleApi();
    const model = new JobsModel(api);
    const panel = new PaddlePanel(model, api);
    let notify = true;

    app.shell.add(panel, 'left', { rank: 600 });

    model.finished.connect((_, jobs) => {
      if (!notify) {
        return;
      }
      for (const job of jobs) {
        const options = {
          autoClose: 10000,
          actions: [
            {
              label: 'Show',
              callback: () => {
                void app.commands.execute(CommandIDs.open, { job: job.name });
              }
            }
          ]
        };
        const text = `Paddle job ${job.name} ${job.phase === 'Succeeded' ? 'succeeded' : 'failed'}${job.message ? `: ${job.message}` : ''}`;
        if (job.phase === 'Succeeded') {
          Notification.success(text, options);
        } else {
          Notification.error(text, options);
        }
      }
    });

    app.commands.addCommand(CommandIDs.open, {
      label: 'Paddle Jobs',
      caption: 'Open the Paddle jobs panel',
      icon: args => (args.isPalette ? undefined : paddleIcon),
      execute: args => {
        app.shell.activateById(panel.id);
        const job = args.job as string | undefined;
        if (job) {
          panel.openJob(job);
        }
      }
    });
    app.commands.addCommand(CommandIDs.newJob, {
      label: 'New Paddle Job',
      caption: 'Open the New job form of the Paddle jobs panel',
      execute: async () => {
        app.shell.activateById(panel.id);
        await panel.showForm();
      }
    });
    palette?.addItem({ command: CommandIDs.open, category: 'Paddle' });
    palette?.addItem({ command: CommandIDs.newJob, category: 'Paddle' });
    launcher?.add({ command: CommandIDs.open, category: 'Other', rank: 50 });

    if (settingRegistry) {
      void settingRegistry
        .load(PLUGIN_ID)
        .then(settings => {
          const apply = (): void => {
            model.refreshSeconds = Number(settings.get('refreshInterval').composite) || 10;
            notify = settings.get('notifications').composite !== false;
            panel.detail.defaultTail = Number(settings.get('logTail').composite) || 1000;
          };
          apply();
          settings.changed.connect(apply);
        })
        .catch(reason => console.warn('paddle-nbext: settings not loaded:', reason));
    }
    model.start();
  }
};

export default plugin;
