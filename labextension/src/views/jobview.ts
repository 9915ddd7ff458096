/**
 * One job in the main area (a `MainAreaWidget` per job, so views can be dragged, split and
 * restored): the reason at the top, phase and replica summary, times that tick, actions, a
 * slot for live training metrics, the replica table, the log and the spec.
 *
 * A failed job opens on its failed replica's log with the traceback marked and in view.
 */
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { PaddleApi } from '../api/client';
import { clear, h } from './dom';
import {
  RESUMABLE_PHASES,
  absoluteTime,
  countsText,
  formatAge,
  formatDuration,
  phaseClass
} from '../logic/format';
import { __ } from '../i18n';
import { IReplicaRef, LogPanel, replicaKey } from './logpanel';
import { shownPhase } from '../logic/preparing';
import { ranksPerTrainer } from '../logic/ranks';
import { replicaToOpen } from '../logic/replicas';
import { ReplicaTable } from './replicatable';
import { CheckpointsView } from './checkpointsview';
import { IJobStatus, IReplica, TERMINAL_PHASES } from '../api/types';

/** The tab title's class while a view is the preview tab (in italics). */
export const PREVIEW_CLASS = 'pn-preview-tab';

/** What the action buttons do (dialogs and notifications live with the app, `jobtab.ts`). */
export interface IJobActions {
  /** Confirm and cancel; the job's new status, or null when kept or it failed. */
  cancel(name: string): Promise<IJobStatus | null>;
  /** Confirm and delete; true once deleted. */
  remove(name: string, running: boolean): Promise<boolean>;
  copySpec(job: IJobStatus): void;
  /** Confirm and resume an ended job from its latest checkpoint; the new job, or null. */
  resume(job: IJobStatus): Promise<IJobStatus | null>;
}

export interface IJobViewOptions {
  api: PaddleApi;
  actions: IJobActions;
  job: IJobStatus;
  tail: number;
  /** Esc or "← Jobs": back to the job's row in the sidebar list. */
  back: (name: string) => void;
  /** Open one replica's log in a tab of its own. */
  openLog?: (name: string, ref: IReplicaRef) => void;
  /** Open another job's view (the job a Resume started, the job this one resumed). */
  openJob?: (name: string) => void;
  /** Whether a job is in the list (a resumed job's origin may have been deleted since). */
  isListed?: (name: string) => boolean;
}

export class JobView extends Widget {
  readonly name: string;
  readonly logs: LogPanel;
  private _job: IJobStatus;
  private _opened = false;
  private _preview = false;
  private _readerChoseReplica = false;
  private _metrics: Widget | null = null;
  private _ticker = 0;
  private readonly _heading: HTMLElement;
  private readonly _badge: HTMLElement;
  private readonly _message: HTMLElement;
  private readonly _times: HTMLElement;
  private readonly _counts: HTMLElement;
  private readonly _cancel: HTMLButtonElement;
  private readonly _resume: HTMLButtonElement;
  private readonly _checkpoints: CheckpointsView;
  private readonly _resumedFrom: HTMLElement;
  private _checkpointsFor = '';
  private readonly _replicas: HTMLTableSectionElement;
  private readonly _replicaTable: ReplicaTable;
  private readonly _spec: HTMLPreElement;
  /** Where issue 14's training metrics go (`setMetricsWidget`). */
  readonly metricsSlot: HTMLElement;
  /** Where issue 36's timeline and resource use go, under the header (`setHealthWidget`). */
  readonly healthSlot: HTMLElement;
  private _health: Widget | null = null;
  /** Called after the replica table re-rendered its rows (resource use fills their Use cells). */
  onReplicasRendered: (() => void) | null = null;

  constructor(private readonly _options: IJobViewOptions) {
    super();
    const job = _options.job;
    this.name = job.name;
    this._job = job;
    this.addClass('pn-job-view');
    this.node.setAttribute('data-testid', 'paddle-detail');
    this.node.setAttribute('data-job', job.name);
    this._heading = h(
      'h2',
      { className: 'pn-detail-name', 'data-testid': 'paddle-detail-name', tabindex: -1 },
      job.name
    );
    this._badge = h('span', { className: 'pn-badge', 'data-testid': 'paddle-detail-phase' });
    this._message = h('p', {
      className: 'pn-detail-message',
      'data-testid': 'paddle-detail-message'
    });
    this._counts = h('p', { className: 'pn-detail-counts', 'data-testid': 'paddle-detail-counts' });
    this._times = h('p', { className: 'pn-detail-times', 'data-testid': 'paddle-detail-times' });
    const back = h(
      'button',
      {
        className: 'pn-button pn-back',
        type: 'button',
        'data-testid': 'paddle-back',
        title: __('Back to the job list (Esc)')
      },
      __('← Jobs')
    );
    back.addEventListener('click', () => this._options.back(this.name));
    this._cancel = h(
      'button',
      { className: 'pn-button', type: 'button', 'data-testid': 'paddle-cancel' },
      __('Cancel')
    );
    const remove = h(
      'button',
      { className: 'pn-button pn-danger', type: 'button', 'data-testid': 'paddle-delete' },
      __('Delete')
    );
    const copy = h(
      'button',
      { className: 'pn-button', type: 'button', 'data-testid': 'paddle-copy-spec' },
      __('Copy spec')
    );
    this._resume = h(
      'button',
      {
        className: 'pn-button',
        type: 'button',
        'data-testid': 'paddle-resume',
        title: __('Start this job again as a new job from its latest checkpoint')
      },
      __('Resume')
    );
    this._checkpoints = new CheckpointsView(_options.api, job.name, count =>
      this._renderResume(count)
    );
    this._resumedFrom = h('p', {
      className: 'pn-detail-resumed-from',
      'data-testid': 'paddle-detail-resumed-from',
      hidden: true
    });
    this._resume.addEventListener('click', () => void this._resumeJob());
    this._cancel.addEventListener('click', () => void this._cancelJob());
    remove.addEventListener('click', () => void this._deleteJob());
    copy.addEventListener('click', () => this._options.actions.copySpec(this._job));

    this._replicas = h('tbody', { role: 'rowgroup' });
    this._replicaTable = new ReplicaTable(this._replicas, {
      ranFor,
      showLogs: ref => {
        this._readerChoseReplica = true;
        this.logs.select(ref);
        void this.logs.show();
      }
    });
    const table = h(
      'table',
      // Explicit roles: a narrow view lays the rows out as blocks (style/base.css), which
      // would otherwise drop the table's semantics for screen readers.
      { className: 'pn-replicas', 'data-testid': 'paddle-replicas', role: 'table' },
      h('caption', { className: 'pn-sr-only' }, __('Replicas of %1', job.name)),
      h(
        'thead',
        { role: 'rowgroup' },
        h(
          'tr',
          { role: 'row' },
          ...[__('Replica'), __('Phase'), __('Reason'), __('Restarts'), __('Ran'), __('Use')].map(
            label => h('th', { scope: 'col', role: 'columnheader' }, label)
          ),
          h(
            'th',
            { scope: 'col', role: 'columnheader' },
            h('span', { className: 'pn-sr-only' }, __('Log'))
          )
        )
      ),
      this._replicas
    );
    this._spec = h(
      'pre',
      { className: 'pn-spec', 'data-testid': 'paddle-spec' },
      JSON.stringify(job.spec, null, 2)
    );
    this.logs = new LogPanel(_options.api, job.name, {
      tail: _options.tail,
      follow: !TERMINAL_PHASES.has(job.phase),
      openInTab: _options.openLog ? ref => _options.openLog!(this.name, ref) : undefined
    });
    this.metricsSlot = h('section', {
      className: 'pn-metrics',
      'data-testid': 'paddle-metrics',
      'aria-label': __('Training metrics'),
      hidden: true
    });
    this.healthSlot = h('section', {
      className: 'pn-health',
      'data-testid': 'paddle-health',
      'aria-label': __('Training health'),
      hidden: true
    });
    this.node.appendChild(
      h(
        'div',
        { className: 'pn-job-view-body' },
        h('div', { className: 'pn-detail-head' }, back, this._heading, this._badge),
        this._message,
        this._counts,
        this._times,
        this._resumedFrom,
        this._checkpoints.line,
        this.healthSlot,
        h('div', { className: 'pn-actions' }, this._cancel, remove, copy, this._resume),
        this.metricsSlot,
        h('h3', {}, __('Replicas')),
        h('div', { className: 'pn-table-scroll' }, table),
        h('h3', {}, __('Logs')),
        this.logs.node,
        this._checkpoints.list,
        h('details', { className: 'pn-spec-section' }, h('summary', {}, __('Spec')), this._spec)
      )
    );
    this.node.addEventListener('keydown', event => {
      if (event.key === 'Escape' && !event.defaultPrevented) {
        event.preventDefault();
        this._options.back(this.name);
      }
    });
    this.logs.node.addEventListener('change', event => {
      if ((event.target as Element).getAttribute('data-testid') === 'paddle-log-replica') {
        this._readerChoseReplica = true;
      }
    });
    this._render(job);
  }

  get job(): IJobStatus {
    return this._job;
  }

  /**
   * Put a widget (issue 14's metrics chart) in the metrics section; `null` empties it.  The
   * view owns nothing of it beyond attaching and detaching.
   */
  setMetricsWidget(widget: Widget | null): void {
    if (this._metrics?.isAttached) {
      Widget.detach(this._metrics);
    }
    this._metrics = widget;
    this.metricsSlot.hidden = widget === null;
    this._attachMetrics();
  }

  /** Put a widget (issue 36's timeline and resource use) under the header; `null` empties it. */
  setHealthWidget(widget: Widget | null): void {
    if (this._health?.isAttached) {
      Widget.detach(this._health);
    }
    this._health = widget;
    this.healthSlot.hidden = widget === null;
    this._attachMetrics();
  }

  /** Lumino attaches only into a host in the document: before that, wait for onAfterAttach. */
  private _attachMetrics(): void {
    if (this._health && !this._health.isAttached && this.isAttached) {
      Widget.attach(this._health, this.healthSlot);
    }
    if (this._metrics && !this._metrics.isAttached && this.isAttached) {
      Widget.attach(this._metrics, this.metricsSlot);
    }
  }

  /**
   * Move keyboard focus to the job's heading and show the view from its top (after opening it
   * from the list, a notification or a command).  The browser's own scroll-into-view on focus
   * is off: a view just added to the dock is not laid out yet, so that scroll would leave the
   * view opened ~100 px down, its Back button, name and reason above the fold.
   */
  focusHeading(): void {
    this._heading.focus({ preventScroll: true });
    this.node.scrollTop = 0;
  }

  /** Whether this view is in the preview tab (`previewtab.ts`): its title says so. */
  setPreview(preview: boolean): void {
    this._preview = preview;
    this._renderTitle(this._job);
  }

  /**
   * The tab's title: a resumed job's starts with ↻, so its tab is told apart from its origin's
   * even when both names are cut to the same first letters ("ckpt-can…"); a preview tab's is in
   * italics (`pn-preview-tab`) and its tooltip says how to keep it.
   */
  private _renderTitle(job: IJobStatus): void {
    this.title.label = job.resumed_from ? `↻ ${job.name}` : job.name;
    const caption = `${job.name}: ${job.phase}${job.message ? ` — ${job.message}` : ''}`;
    this.title.caption = this._preview
      ? `${caption}\n${__('Preview: the next job you open replaces it. Double-click to keep it.')}`
      : caption;
    this.title.className = this._preview ? PREVIEW_CLASS : '';
  }

  /** A new status of this job from the event stream. */
  setJob(job: IJobStatus): void {
    if (job === this._job) {
      return;
    }
    const wasFailed = this._job.phase === 'Failed';
    this._job = job;
    this._render(job);
    if (job.phase === 'Failed' && !wasFailed && this._opened && !this._readerChoseReplica) {
      void this._openOn(job);
    }
  }

  /** Refresh the relative times (called on a timer while the view is visible). */
  tick(): void {
    const job = this._job;
    const now = Date.now();
    if (!TERMINAL_PHASES.has(job.phase)) {
      this._checkpoints.poll(); // live while it runs: is cancelling safe?
    }
    const parts = [
      [__('created %1 ago', formatAge(job.created, now)), job.created],
      job.started ? [__('started %1 ago', formatAge(job.started, now)), job.started] : null,
      job.finished
        ? [__('ran %1', formatDuration(job.started ?? job.created, job.finished)), job.finished]
        : null,
      [__('backend %1', job.backend), null]
    ].filter((part): part is [string, string | null] => part !== null);
    clear(this._times);
    parts.forEach(([text, iso], i) => {
      if (i) {
        this._times.appendChild(document.createTextNode(' · '));
      }
      this._times.appendChild(
        iso ? h('time', { dateTime: iso, title: absoluteTime(iso) }, text) : h('span', {}, text)
      );
    });
    for (const row of this._replicas.querySelectorAll<HTMLElement>('tr[data-replica]')) {
      const replica = job.replicas.find(r => replicaKey(r) === row.getAttribute('data-replica'));
      const cell = row.querySelector('.pn-ran');
      if (replica && cell && cell.textContent !== ranFor(replica)) {
        cell.textContent = ranFor(replica);
      }
    }
  }

  private _render(job: IJobStatus): void {
    this._renderTitle(job);
    this.node.setAttribute('data-phase', job.phase);
    this._badge.className = `pn-badge ${phaseClass(shownPhase(job))}`;
    this._badge.textContent = shownPhase(job);
    this._message.textContent = job.message;
    this._message.classList.toggle(
      'pn-error-text',
      job.phase === 'Failed' || job.phase === 'Unknown'
    );
    this._counts.textContent = countsText(job);
    this._cancel.disabled = TERMINAL_PHASES.has(job.phase);
    this._resume.hidden = !RESUMABLE_PHASES.has(job.phase);
    this._renderReplicas(job);
    this._renderResumedFrom(job);
    if (this._checkpointsFor !== job.phase) {
      this._checkpointsFor = job.phase;
      void this._checkpoints.load();
    }
    this.logs.setReplicas(job.replicas, ranksPerTrainer(job.spec), Boolean(job.spec.requirements));
    this.tick();
  }

  /**
   * "Resumed from <job> at step N" for a job that Resume started: the job's name is a button
   * that opens that job's view while it is listed, plain text once it is gone.
   */
  private _renderResumedFrom(job: IJobStatus): void {
    const link = job.resumed_from;
    const key = link ? `${link.job}@${link.step}@${this._listed(link.job)}` : '';
    if (this._resumedFrom.dataset.shown === key) {
      return;
    }
    this._resumedFrom.dataset.shown = key;
    clear(this._resumedFrom);
    this._resumedFrom.hidden = !link;
    if (!link) {
      return;
    }
    const origin = link.job;
    let name: HTMLElement;
    if (this._listed(origin) && this._options.openJob) {
      const button = h(
        'button',
        {
          className: 'pn-link',
          type: 'button',
          'data-testid': 'paddle-resumed-from-job',
          title: __('Open job %1', origin)
        },
        origin
      );
      button.addEventListener('click', () => this._options.openJob?.(origin));
      name = button;
    } else {
      name = h('span', { title: __('no longer listed') }, origin);
    }
    this._resumedFrom.append(__('Resumed from '), name);
    if (link.step !== null && link.step !== undefined) {
      this._resumedFrom.append(__(' at step %1', link.step));
    }
  }

  private _listed(name: string): boolean {
    return this._options.isListed ? this._options.isListed(name) : true;
  }

  private _renderReplicas(job: IJobStatus): void {
    this._replicaTable.render(job);
    this.onReplicasRendered?.();
  }

  /** Load the replica the job opens on; a failed one's traceback is marked and scrolled to. */
  private async _openOn(job: IJobStatus): Promise<void> {
    const ref = replicaToOpen(job);
    if (!ref) {
      return;
    }
    this.logs.select(ref);
    const outcome = await this.logs.show();
    if (job.phase === 'Failed' && (outcome === 'loaded' || outcome === 'ended')) {
      this.logs.log.highlightTraceback();
    }
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this._startTicking();
  }

  /**
   * Tick every 5 s while visible.  A view added to the dock in front is attached visible and
   * gets no after-show message: attaching starts the ticker too (before, a view opened from
   * the list did not tick until it had been hidden and shown again).
   */
  private _startTicking(): void {
    this.tick();
    if (!this._ticker) {
      this._ticker = window.setInterval(() => this.tick(), 5000);
    }
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    window.clearInterval(this._ticker);
    this._ticker = 0;
  }

  protected onBeforeDetach(msg: Message): void {
    window.clearInterval(this._ticker);
    this._ticker = 0;
    super.onBeforeDetach(msg);
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this._attachMetrics();
    if (this.isVisible) {
      this._startTicking();
    }
    if (!this._opened) {
      this._opened = true;
      void this._openOn(this._job);
    }
  }

  /**
   * Resume is offered for an ended job that can be resumed; without a checkpoint there is
   * nothing to start from (the server would answer 409), so it is disabled and says why.
   */
  private _renderResume(count: number | null): void {
    const none = count === 0;
    this._resume.disabled = none;
    this._resume.title = none
      ? __(
          'Nothing to resume from: this job saved no checkpoint (training code saves them with paddle_nbext_job.save_checkpoint).'
        )
      : __('Start this job again as a new job from its latest checkpoint');
  }

  private async _resumeJob(): Promise<void> {
    const resumed = await this._options.actions.resume(this._job);
    if (resumed) {
      this._options.openJob?.(resumed.name);
    }
  }

  private async _cancelJob(): Promise<void> {
    const job = await this._options.actions.cancel(this.name);
    if (job) {
      this.setJob(job);
    }
  }

  private async _deleteJob(): Promise<void> {
    this.logs.stop();
    if (await this._options.actions.remove(this.name, !TERMINAL_PHASES.has(this._job.phase))) {
      this._options.back(this.name);
      this.parent?.dispose();
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    window.clearInterval(this._ticker);
    this.logs.stop();
    this.setMetricsWidget(null);
    super.dispose();
  }
}

function ranFor(replica: IReplica): string {
  if (!replica.started) {
    return '';
  }
  if (!replica.finished) {
    return __('%1 so far', formatAge(replica.started, Date.now()));
  }
  return formatDuration(replica.started, replica.finished);
}
