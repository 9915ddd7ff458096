/**
 * One job: phase and message, actions (cancel, delete, copy spec), the replica table with
 * reasons in words, the spec, and a per-replica log viewer (tail, follow, previous).
 */
import { Clipboard, Dialog, Notification, showDialog } from '@jupyterlab/apputils';

import { ApiError, PaddleApi } from './api';
import { clear, h } from './dom';
import { countsText, formatAge, formatDuration, phaseClass, replicaReason } from './format';
import { LogView } from './logview';
import { IJobStatus, IReplica, TERMINAL_PHASES } from './types';

export class JobDetailView {
  readonly node: HTMLElement;
  private _name: string | null = null;
  private _job: IJobStatus | null = null;
  private readonly _title: HTMLElement;
  private readonly _badge: HTMLElement;
  private readonly _message: HTMLElement;
  private readonly _times: HTMLElement;
  private readonly _counts: HTMLElement;
  private readonly _cancel: HTMLButtonElement;
  private readonly _delete: HTMLButtonElement;
  private readonly _copy: HTMLButtonElement;
  private readonly _replicas: HTMLTableSectionElement;
  private readonly _spec: HTMLPreElement;
  private readonly _logReplica: HTMLSelectElement;
  private readonly _logTail: HTMLInputElement;
  private readonly _logFollow: HTMLInputElement;
  private readonly _logPrevious: HTMLInputElement;
  private readonly _logStatus: HTMLElement;
  readonly log: LogView;
  private _logAbort: AbortController | null = null;

  constructor(
    private readonly _api: PaddleApi,
    private readonly _back: () => void,
    defaultTail = 1000
  ) {
    this._title = h('span', { className: 'pn-detail-name', 'data-testid': 'paddle-detail-name' });
    this._badge = h('span', { className: 'pn-badge', 'data-testid': 'paddle-detail-phase' });
    this._message = h('div', {
      className: 'pn-detail-message',
      'data-testid': 'paddle-detail-message'
    });
    this._times = h('div', { className: 'pn-detail-times' });
    this._counts = h('div', {
      className: 'pn-detail-counts',
      'data-testid': 'paddle-detail-counts'
    });
    const back = h(
      'button',
      {
        className: 'pn-button pn-back',
        'data-testid': 'paddle-back',
        title: 'Back to the job list'
      },
      '← Jobs'
    );
    back.addEventListener('click', () => this._back());
    this._cancel = h(
      'button',
      { className: 'pn-button', 'data-testid': 'paddle-cancel' },
      'Cancel'
    );
    this._delete = h(
      'button',
      { className: 'pn-button pn-danger', 'data-testid': 'paddle-delete' },
      'Delete'
    );
    this._copy = h(
      'button',
      { className: 'pn-button', 'data-testid': 'paddle-copy-spec' },
      'Copy spec'
    );
    this._cancel.addEventListener('click', () => void this._confirmCancel());
    this._delete.addEventListener('click', () => void this._confirmDelete());
    this._copy.addEventListener('click', () => this._copySpec());

    this._replicas = h('tbody');
    const table = h(
      'table',
      { className: 'pn-replicas', 'data-testid': 'paddle-replicas' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', {}, 'Replica'),
          h('th', {}, 'Phase'),
          h('th', {}, 'Reason'),
          h('th', {}, 'Restarts'),
          h('th', {}, 'Ran'),
          h('th', {})
        )
      ),
      this._replicas
    );
    this._spec = h('pre', { className: 'pn-spec', 'data-testid': 'paddle-spec' });

    this._logReplica = h('select', {
      className: 'pn-input',
      'data-testid': 'paddle-log-replica',
      'aria-label': 'Replica'
    });
    this._logTail = h('input', {
      className: 'pn-input pn-narrow',
      type: 'number',
      min: 1,
      value: defaultTail,
      'data-testid': 'paddle-log-tail',
      'aria-label': 'Last lines',
      title: 'Show the last N lines (empty: the whole log)'
    });
    this._logFollow = h('input', { type: 'checkbox', 'data-testid': 'paddle-log-follow' });
    this._logPrevious = h('input', { type: 'checkbox', 'data-testid': 'paddle-log-previous' });
    const load = h(
      'button',
      { className: 'pn-button', 'data-testid': 'paddle-log-load' },
      'Show log'
    );
    load.addEventListener('click', () => void this.showLog());
    this._logStatus = h('span', { className: 'pn-log-status', 'data-testid': 'paddle-log-status' });
    this.log = new LogView();

    this.node = h(
      'div',
      { className: 'pn-detail-view', 'data-testid': 'paddle-detail' },
      h('div', { className: 'pn-detail-head' }, back, this._title, this._badge),
      this._message,
      this._counts,
      this._times,
      h('div', { className: 'pn-actions' }, this._cancel, this._delete, this._copy),
      h('h3', {}, 'Replicas'),
      table,
      h('h3', {}, 'Logs'),
      h(
        'div',
        { className: 'pn-log-controls' },
        this._logReplica,
        h('label', {}, 'last ', this._logTail),
        h('label', { title: 'Stream new lines as they are written' }, this._logFollow, ' follow'),
        h(
          'label',
          { title: 'The log of the previous (restarted) container' },
          this._logPrevious,
          ' previous'
        ),
        load,
        this._logStatus
      ),
      this.log.node,
      h('h3', {}, 'Spec'),
      this._spec
    );
  }

  get name(): string | null {
    return this._name;
  }

  set defaultTail(value: number) {
    this._logTail.value = String(value);
  }

  /** Show a job (a different one resets the log pane). */
  show(job: IJobStatus): void {
    if (job.name !== this._name) {
      this.stopLog();
      this.log.clear();
      this._logStatus.textContent = '';
      this._name = job.name;
      this._job = null;
      this._spec.textContent = JSON.stringify(job.spec, null, 2);
    }
    this.update(job);
  }

  update(job: IJobStatus): void {
    if (job === this._job) {
      return;
    }
    const first = this._job === null;
    this._job = job;
    this._title.textContent = job.name;
    this._badge.className = `pn-badge ${phaseClass(job.phase)}`;
    this._badge.textContent = job.phase;
    this._message.textContent = job.message;
    this._counts.textContent = countsText(job);
    const now = Date.now();
    this._times.textContent = [
      `created ${formatAge(job.created, now)} ago`,
      job.started ? `started ${formatAge(job.started, now)} ago` : '',
      job.finished ? `ran ${formatDuration(job.started ?? job.created, job.finished)}` : '',
      `backend ${job.backend}`
    ]
      .filter(Boolean)
      .join(' · ');
    this._cancel.disabled = TERMINAL_PHASES.has(job.phase);
    this._renderReplicas(job, first);
  }

  private _renderReplicas(job: IJobStatus, first: boolean): void {
    clear(this._replicas);
    const selected = this._logReplica.value;
    clear(this._logReplica);
    for (const replica of job.replicas) {
      const key = `${replica.role}-${replica.index}`;
      const logs = h(
        'button',
        {
          className: 'pn-button pn-small',
          'data-testid': 'paddle-replica-logs',
          title: `Show the log of ${replica.role} ${replica.index}`
        },
        'Logs'
      );
      logs.addEventListener('click', () => {
        this._logReplica.value = key;
        void this.showLog();
      });
      this._replicas.appendChild(
        h(
          'tr',
          { 'data-testid': 'paddle-replica-row', 'data-replica': key, 'data-phase': replica.phase },
          h('td', {}, `${replica.role} ${replica.index}`),
          h(
            'td',
            {},
            h('span', { className: `pn-badge ${phaseClass(replica.phase)}` }, replica.phase)
          ),
          h('td', { className: 'pn-reason' }, replicaReason(replica, job.phase)),
          h('td', {}, String(replica.restarts)),
          h('td', {}, ranFor(replica)),
          h('td', {}, logs)
        )
      );
      this._logReplica.appendChild(h('option', { value: key }, `${replica.role} ${replica.index}`));
    }
    if (selected && job.replicas.some(r => `${r.role}-${r.index}` === selected)) {
      this._logReplica.value = selected;
    } else if (first) {
      const trainer = job.replicas.find(r => r.role === 'trainer');
      if (trainer) {
        this._logReplica.value = `trainer-${trainer.index}`;
      }
    }
  }

  /** Load the selected replica's log (and keep streaming it when "follow" is on). */
  async showLog(): Promise<void> {
    const name = this._name;
    const key = this._logReplica.value;
    if (!name || !key) {
      return;
    }
    const at = key.lastIndexOf('-');
    const role = key.slice(0, at);
    const index = parseInt(key.slice(at + 1), 10);
    const tailText = this._logTail.value.trim();
    const tail = tailText ? Math.max(1, parseInt(tailText, 10) || 1) : null;
    const options = { role, index, tail, previous: this._logPrevious.checked };
    this.stopLog();
    this.log.clear();
    const abort = new AbortController();
    this._logAbort = abort;
    const label = `${role} ${index}${options.previous ? ' (previous)' : ''}`;
    try {
      if (this._logFollow.checked && !options.previous) {
        this._logStatus.textContent = `following ${label}…`;
        this.node.setAttribute('data-log-state', 'following');
        await this._api.followLogs(name, options, text => this.log.append(text), abort.signal);
        this._logStatus.textContent = `${label}: replica ended`;
      } else {
        this._logStatus.textContent = `loading ${label}…`;
        this.log.append(await this._api.logs(name, options, abort.signal));
        this._logStatus.textContent = label;
      }
      await this.log.whenFlushed();
      this.node.setAttribute('data-log-state', 'loaded');
    } catch (error) {
      if (abort.signal.aborted) {
        return;
      }
      this._logStatus.textContent = `${label}: ${(error as Error).message}`;
      this.node.setAttribute('data-log-state', 'error');
    } finally {
      if (this._logAbort === abort) {
        this._logAbort = null;
      }
    }
  }

  stopLog(): void {
    this._logAbort?.abort();
    this._logAbort = null;
  }

  private async _confirmCancel(): Promise<void> {
    const name = this._name;
    if (!name) {
      return;
    }
    const result = await showDialog({
      title: `Cancel job ${name}?`,
      body: 'Every replica is stopped. The job record and its logs are kept until you delete it.',
      buttons: [
        Dialog.cancelButton({ label: 'Keep running' }),
        Dialog.warnButton({ label: 'Cancel job' })
      ]
    });
    if (!result.button.accept) {
      return;
    }
    try {
      const job = await this._api.cancel(name);
      if (this._name === name) {
        this.update(job);
      }
    } catch (error) {
      Notification.error(`Could not cancel ${name}: ${(error as ApiError).message}`, {
        autoClose: 8000
      });
    }
  }

  private async _confirmDelete(): Promise<void> {
    const name = this._name;
    if (!name) {
      return;
    }
    const running = this._job && !TERMINAL_PHASES.has(this._job.phase);
    const result = await showDialog({
      title: `Delete job ${name}?`,
      body: `${running ? 'The job is stopped first. ' : ''}Its record, logs and package snapshot are removed. This cannot be undone.`,
      buttons: [Dialog.cancelButton({ label: 'Keep' }), Dialog.warnButton({ label: 'Delete' })]
    });
    if (!result.button.accept) {
      return;
    }
    try {
      this.stopLog();
      await this._api.remove(name);
      if (this._name === name) {
        this._back();
      }
    } catch (error) {
      Notification.error(`Could not delete ${name}: ${(error as ApiError).message}`, {
        autoClose: 8000
      });
    }
  }

  private _copySpec(): void {
    if (!this._job) {
      return;
    }
    Clipboard.copyToSystem(JSON.stringify(this._job.spec, null, 2));
    Notification.info(`Spec of ${this._job.name} copied to the clipboard.`, { autoClose: 3000 });
  }

  /** Forget the current job (the list is shown again). */
  reset(): void {
    this.stopLog();
    this._name = null;
    this._job = null;
  }
}

function ranFor(replica: IReplica): string {
  if (!replica.started) {
    return '';
  }
  if (!replica.finished) {
    return `${formatAge(replica.started, Date.now())} so far`;
  }
  return formatDuration(replica.started, replica.finished);
}
