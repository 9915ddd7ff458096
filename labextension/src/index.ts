/**
 * paddle-nbext JupyterLab / Notebook 7 extension: the "Paddle jobs" sidebar (the job list and
 * the New job form) and one main-area view per job, restored after a reload.
 *
 * `ILabShell` is not required, so the same plugin works in Notebook 7: on its `/tree` page
 * (`INotebookTree`, optional so JupyterLab alone keeps working) the list is a "Paddle jobs" tab
 * beside Files and Running; on its notebook pages it is in the left area.  The job stream
 * starts at activation, so notifications arrive and jobs submitted from a notebook show up
 * even before the panel is first opened.  The plugin provides that job model to other
 * extensions as `IJobsModel` (./tokens).
 */
import { INotebookTree } from '@jupyter-notebook/tree';
import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, Notification, WidgetTracker } from '@jupyterlab/apputils';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { ILauncher } from '@jupyterlab/launcher';
import { Contents } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { ITranslator } from '@jupyterlab/translation';

import { PaddleApi } from './api/client';
import { __, setTranslator } from './i18n';
import { toastText } from './logic/toast';
import { JobViewWidget, jobActions } from './views/jobtab';
import { PREVIEW_CLASS } from './views/jobview';
import { PreviewTab } from './views/previewtab';
import { IReplicaRef } from './views/logpanel';
import { rankKey } from './logic/ranks';
import { LogTabWidget } from './views/logtab';
import { HealthView } from './views/healthview';
import { MetricsView } from './views/metricsview';
import { WARNING_KINDS } from './views/timelineview';
import { JobsModel } from './state/model';
import { PaddlePanel, iconButton, paddleIcon } from './views/panel';
import { CompareWidget, compareIcon } from './views/compareview';
import { NotificationsWidget, bellIcon } from './views/notifyview';
import { jobFromLink } from './logic/joblink';
import { IFormPrefill, prefillFor } from './logic/prefill';
import { IPlacement, shellPlacement, treePlacement } from './logic/placement';
import { RowProgress } from './views/rowprogress';
import { IJobStatus } from './api/types';
import { IJobsModel } from './tokens';

export { IJobsModel } from './tokens';

const PLUGIN_ID = 'paddle-nbext-labextension:plugin';

export const CommandIDs = {
  open: 'paddle-nbext:open',
  openJob: 'paddle-nbext:open-job',
  openJobInNewTab: 'paddle-nbext:open-job-in-new-tab',
  newJob: 'paddle-nbext:new-job',
  compare: 'paddle-nbext:compare-jobs',
  compareWith: 'paddle-nbext:compare-with',
  runAsJob: 'paddle-nbext:run-as-job',
  notifications: 'paddle-nbext:notifications'
} as const;

const plugin: JupyterFrontEndPlugin<IJobsModel> = {
  id: PLUGIN_ID,
  description: 'Sidebar panel and job views for distributed PaddlePaddle jobs (paddle-nbext).',
  autoStart: true,
  provides: IJobsModel,
  optional: [
    ISettingRegistry,
    ICommandPalette,
    ILauncher,
    ILayoutRestorer,
    ITranslator,
    IDefaultFileBrowser,
    INotebookTree
  ],
  activate: (
    app: JupyterFrontEnd,
    settingRegistry: ISettingRegistry | null,
    palette: ICommandPalette | null,
    launcher: ILauncher | null,
    restorer: ILayoutRestorer | null,
    translator: ITranslator | null,
    fileBrowser: IDefaultFileBrowser | null,
    notebookTree: INotebookTree | null
  ): IJobsModel => {
    setTranslator(translator);
    const api = new PaddleApi();
    const model = new JobsModel(api);
    const tracker = new WidgetTracker<JobViewWidget>({ namespace: 'paddle-nbext-job' });
    const logTabs = new Map<string, LogTabWidget>();
    const actions = jobActions(api);
    const preview = new PreviewTab();
    let notify = true;
    let tail = 1000;
    const placement: IPlacement = notebookTree
      ? treePlacement(notebookTree)
      : shellPlacement(app.shell);

    /** Back from a job view: the sidebar in front, focus on the job's row. */
    const backToList = (name: string): void => {
      placement.activate(panel);
      panel.showList();
      if (!panel.list.focusRow(name)) {
        panel.node.querySelector<HTMLElement>('[role="option"]')?.focus();
      }
    };

    const openLog = (name: string, ref: IReplicaRef): void => {
      const id = `${name}/${rankKey(ref)}`;
      const open = logTabs.get(id);
      if (open && !open.isDisposed) {
        placement.activate(open);
        return;
      }
      const job = model.job(name);
      if (!job) {
        return;
      }
      const tab = new LogTabWidget(api, job, ref, tail);
      tab.disposed.connect(() => logTabs.delete(id));
      logTabs.set(id, tab);
      placement.addView(tab, true);
    };

    /**
     * Open a job's view (or bring it to the front) and put focus on its heading.  Unless
     * `keep`, a view that was not open takes the preview tab (`views/previewtab.ts`).
     */
    const openJob = async (
      name: string,
      focus = true,
      keep = false
    ): Promise<JobViewWidget | null> => {
      const open = tracker.find(widget => widget.content.name === name);
      if (open) {
        if (keep) {
          preview.keep(open);
        }
        placement.activate(open);
        if (focus) {
          open.content.focusHeading();
        }
        return open;
      }
      let job: IJobStatus | undefined = model.job(name);
      if (!job) {
        try {
          job = await api.getJob(name);
        } catch {
          return null; // deleted since (a restored layout naming an old job)
        }
      }
      const widget = new JobViewWidget({
        api,
        actions,
        job,
        tail,
        back: backToList,
        openLog,
        openJob: other => void openJob(other, true, true),
        isListed: other => model.job(other) !== undefined
      });
      const metrics = new MetricsView({ api, model, name });
      widget.content.setMetricsWidget(metrics);
      widget.disposed.connect(() => metrics.dispose());
      const health = new HealthView({
        api,
        model,
        name,
        replicaRows: () =>
          widget.content.node.querySelector('[data-testid="paddle-replicas"] tbody')
      });
      widget.content.setHealthWidget(health);
      widget.content.onReplicasRendered = () => health.usage.decorateRows();
      widget.disposed.connect(() => health.dispose());
      widget.title.icon = paddleIcon;
      void tracker.add(widget);
      if (!keep) {
        preview.show(widget);
      }
      placement.addView(widget);
      if (focus) {
        widget.content.focusHeading();
      }
      return widget;
    };

    // The package field starts as the file browser's folder (not at the root: that is HOME).
    const currentFolder = (): IFormPrefill =>
      fileBrowser?.model.path ? { trainer_package: fileBrowser.model.path } : {};
    const panel = new PaddlePanel({
      model,
      api,
      openJob: (name, keep) => void openJob(name, true, keep),
      formPrefill: currentFolder
    });
    // Runs side by side: one comparison tab; choosing jobs from the list adds them to it.
    const compareTracker = new WidgetTracker<CompareWidget>({ namespace: 'paddle-nbext-compare' });
    const openCompare = (jobs: readonly string[]): CompareWidget => {
      let widget = compareTracker.find(() => true);
      if (widget && !widget.isDisposed) {
        widget.content.setJobs([...widget.content.jobs, ...jobs]);
        placement.activate(widget);
        return widget;
      }
      widget = new CompareWidget({ api, model, jobs });
      void compareTracker.add(widget);
      placement.addView(widget);
      return widget;
    };
    panel.toolbar.insertAfter(
      'new-job',
      'compare',
      iconButton(
        compareIcon,
        __('Compare runs: choose two or more jobs to see side by side'),
        'paddle-compare-jobs',
        () =>
          void app.commands.execute(CommandIDs.compare, {
            jobs: tracker.currentWidget ? [tracker.currentWidget.content.name] : []
          })
      )
    );
    // Notifications: one settings tab, from the toolbar's bell.
    let notificationsTab: NotificationsWidget | null = null;
    panel.toolbar.insertBefore(
      'refresh',
      'notifications',
      iconButton(
        bellIcon,
        __('Notifications: be told by webhook or e-mail when a job fails or stalls'),
        'paddle-notifications-open',
        () => void app.commands.execute(CommandIDs.notifications)
      )
    );
    const rowProgress = new RowProgress(model, panel.node);
    panel.disposed.connect(() => rowProgress.dispose());
    placement.addPanel(panel);
    restorer?.add(panel, 'paddle-nbext-panel');
    if (restorer) {
      void restorer.restore(compareTracker, {
        command: CommandIDs.compare,
        args: widget => ({ jobs: [...widget.content.jobs] }),
        name: () => 'compare'
      });
      void restorer.restore(tracker, {
        command: CommandIDs.openJob,
        args: widget => ({ job: widget.content.name, focus: false, keep: true }),
        name: widget => widget.content.name
      });
    }

    // Job views and log tabs follow the stream; a deleted job's views close.
    model.changed.connect((_, state) => {
      tracker.forEach(widget => {
        const job = state.jobs.get(widget.content.name);
        if (job) {
          widget.content.setJob(job);
        } else if (state.loaded) {
          widget.dispose();
        }
      });
      for (const [id, tab] of logTabs) {
        const job = state.jobs.get(id.slice(0, id.indexOf('/')));
        if (job) {
          tab.setJob(job);
        }
      }
    });
    tracker.currentChanged.connect((_, widget) =>
      panel.list.setSelected(widget?.content.name ?? null)
    );

    model.finished.connect((_, jobs) => {
      if (!notify) {
        return;
      }
      for (const job of jobs) {
        const options = {
          autoClose: 10000,
          actions: [
            {
              label: __('Show'),
              callback: () => {
                void app.commands.execute(CommandIDs.openJob, { job: job.name });
              }
            }
          ]
        };
        const text =
          job.phase === 'Succeeded'
            ? __('Paddle job %1 succeeded', job.name)
            : __('Paddle job %1 failed', job.name);
        // Whole sentences only: the rest of a long message is in the view "Show" opens.
        const full = toastText(text, job.message).text;
        if (job.phase === 'Succeeded') {
          Notification.success(full, options);
        } else {
          Notification.error(full, options);
        }
      }
    });

    // Training health: a memory warning, a stall or a restart of one of the user's jobs.
    model.timeline.connect((_, event) => {
      for (const entry of event.entries) {
        if (WARNING_KINDS.has(entry.kind)) {
          Notification.warning(__('Paddle job %1: %2', event.name, entry.text), {
            autoClose: 15000,
            actions: [
              {
                label: __('Show'),
                callback: () => {
                  void app.commands.execute(CommandIDs.openJob, { job: event.name });
                }
              }
            ]
          });
        }
      }
    });

    app.commands.addCommand(CommandIDs.open, {
      label: __('Paddle Jobs'),
      caption: __('Open the Paddle jobs panel'),
      icon: args => (args.isPalette ? undefined : paddleIcon),
      execute: args => {
        placement.activate(panel);
        const job = args.job as string | undefined;
        if (job) {
          return openJob(job);
        }
        panel.node.querySelector<HTMLElement>('[role="option"][tabindex="0"]')?.focus();
        return undefined;
      }
    });
    app.commands.addCommand(CommandIDs.openJob, {
      label: args =>
        typeof args.job === 'string' ? __('Open Paddle job %1', args.job) : __('Open Paddle job'),
      execute: args =>
        typeof args.job === 'string'
          ? openJob(args.job, args.focus !== false, args.keep === true)
          : null
    });
    // A job row's context menu: open it in a tab of its own, not the preview tab.
    const rowUnderMenu = (): string | null =>
      app
        .contextMenuHitTest(node => node.matches('[data-testid="paddle-job-row"]'))
        ?.getAttribute('data-job') ?? null;
    app.commands.addCommand(CommandIDs.openJobInNewTab, {
      label: __('Open in New Tab'),
      caption: __('Open the job in a tab of its own (a single click previews it)'),
      isVisible: () => rowUnderMenu() !== null,
      execute: () => {
        const name = rowUnderMenu();
        return name ? openJob(name, true, true) : null;
      }
    });
    app.contextMenu.addItem({
      command: CommandIDs.openJobInNewTab,
      selector: '[data-testid="paddle-job-row"]',
      rank: 10
    });
    app.commands.addCommand(CommandIDs.compare, {
      label: __('Compare Paddle Jobs'),
      caption: __(
        'Show two or more jobs side by side: curves, final and best metrics, what differs'
      ),
      icon: args => (args.isPalette ? undefined : compareIcon),
      execute: args => {
        const jobs = Array.isArray(args.jobs) ? args.jobs.map(String) : [];
        return openCompare(jobs);
      }
    });
    // A job row's context menu: add it to the comparison (opened if none is).
    app.commands.addCommand(CommandIDs.compareWith, {
      label: __('Compare…'),
      caption: __('Add this job to the comparison of runs'),
      isVisible: () => rowUnderMenu() !== null,
      execute: () => {
        const name = rowUnderMenu();
        return name ? openCompare([name]) : null;
      }
    });
    app.contextMenu.addItem({
      command: CommandIDs.compareWith,
      selector: '[data-testid="paddle-job-row"]',
      rank: 11
    });
    app.commands.addCommand(CommandIDs.notifications, {
      label: __('Paddle Job Notifications'),
      caption: __('Where you are told about your jobs: webhook, e-mail, which events'),
      icon: args => (args.isPalette ? undefined : bellIcon),
      execute: () => {
        if (!notificationsTab || notificationsTab.isDisposed) {
          notificationsTab = new NotificationsWidget(api);
          placement.addView(notificationsTab);
        } else {
          placement.activate(notificationsTab);
        }
        return notificationsTab;
      }
    });
    // A double-click on the preview tab keeps it, as in editors.
    document.addEventListener('dblclick', event => {
      const tab = (event.target as Element | null)?.closest?.(`.lm-TabBar-tab.${PREVIEW_CLASS}`);
      if (tab && preview.widget) {
        preview.keep(preview.widget);
      }
    });
    const selectedItem = (): Contents.IModel | null => {
      const next = fileBrowser?.selectedItems().next();
      return next && !next.done ? next.value : null;
    };

    app.commands.addCommand(CommandIDs.newJob, {
      label: __('New Paddle Job'),
      caption: __('Open the New job form of the Paddle jobs panel'),
      execute: async () => {
        placement.activate(panel);
        await panel.showForm(currentFolder());
      }
    });
    app.commands.addCommand(CommandIDs.runAsJob, {
      label: __('Run as Paddle job…'),
      caption: __('Open the New job form with this folder or Python file filled in'),
      icon: paddleIcon,
      isVisible: () => {
        const item = selectedItem();
        return Boolean(item && (item.type === 'directory' || item.path.endsWith('.py')));
      },
      execute: async () => {
        const item = selectedItem();
        if (!item) {
          return;
        }
        placement.activate(panel);
        await panel.showForm(prefillFor(item.path, item.type === 'directory'));
      }
    });
    for (const selector of [
      '.jp-DirListing-item[data-isdir="true"]',
      '.jp-DirListing-item[data-file-type="python"]'
    ]) {
      app.contextMenu.addItem({ command: CommandIDs.runAsJob, selector, rank: 60 });
    }
    palette?.addItem({ command: CommandIDs.open, category: 'Paddle' });
    palette?.addItem({ command: CommandIDs.newJob, category: 'Paddle' });
    palette?.addItem({ command: CommandIDs.compare, category: 'Paddle' });
    palette?.addItem({ command: CommandIDs.notifications, category: 'Paddle' });
    launcher?.add({ command: CommandIDs.open, category: 'Other', rank: 50 });

    if (settingRegistry) {
      void settingRegistry
        .load(PLUGIN_ID)
        .then(settings => {
          const apply = (): void => {
            model.refreshSeconds = Number(settings.get('refreshInterval').composite) || 10;
            notify = settings.get('notifications').composite !== false;
            tail = Number(settings.get('logTail').composite) || 1000;
          };
          apply();
          settings.changed.connect(apply);
        })
        .catch(reason => console.warn('paddle-nbext: settings not loaded:', reason));
    }
    model.start();
    // A notification's link (`?paddle-job=<name>`) opens that job once the layout is back.
    const linked = jobFromLink(window.location.search);
    if (linked) {
      void app.restored.then(() => openJob(linked, true, true));
    }
    return model;
  }
};

export default plugin;
