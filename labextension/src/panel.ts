/**
 * The left-sidebar panel: a header (New job, refresh), a banner for problems and connection
 * state, and one of three views — the job list, a job's details, the New job form.
 */
import { LabIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { ApiError, PaddleApi } from './api';
import { JobDetailView } from './detailview';
import { h } from './dom';
import { JobFormView } from './formview';
import { JobListView } from './listview';
import { JobsModel } from './model';
import { IJobsState } from './state';

const ICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">' +
  '<g class="jp-icon3" fill="#616161">' +
  '<rect x="3" y="4" width="18" height="4" rx="1"/><rect x="3" y="10" width="12" height="4" rx="1"/>' +
  '<rect x="3" y="16" width="15" height="4" rx="1"/><circle cx="19" cy="12" r="2"/></g></svg>';

export const paddleIcon = new LabIcon({ name: 'paddle-nbext:jobs', svgstr: ICON_SVG });

type View = 'list' | 'detail' | 'form';

export class PaddlePanel extends Widget {
  readonly list: JobListView;
  readonly detail: JobDetailView;
  readonly form: JobFormView;
  private readonly _banner: HTMLElement;
  private readonly _connection: HTMLElement;
  private readonly _version: HTMLElement;
  private _view: View = 'list';
  private _ticker = 0;

  constructor(
    readonly model: JobsModel,
    api: PaddleApi
  ) {
    super();
    this.id = 'paddle-nbext-panel';
    this.addClass('pn-panel');
    this.title.icon = paddleIcon;
    this.title.caption = 'Paddle jobs';
    this.list = new JobListView(name => this.openJob(name));
    this.detail = new JobDetailView(api, () => this.showList());
    this.form = new JobFormView(
      api,
      () => this.showList(),
      job => {
        model.dispatch({ type: 'job', job });
        this.openJob(job.name);
      }
    );
    const newJob = h(
      'button',
      {
        className: 'pn-button pn-primary',
        'data-testid': 'paddle-new-job',
        title: 'Submit a new distributed job'
      },
      'New job'
    );
    newJob.addEventListener('click', () => void this.showForm());
    const refresh = h(
      'button',
      {
        className: 'pn-button',
        'data-testid': 'paddle-refresh',
        title: 'Reload the job list and reconnect'
      },
      'Refresh'
    );
    refresh.addEventListener('click', () => model.retry());
    this._connection = h('span', {
      className: 'pn-connection',
      'data-testid': 'paddle-connection'
    });
    this._banner = h('div', {
      className: 'pn-banner',
      'data-testid': 'paddle-banner',
      role: 'alert',
      hidden: true
    });
    const header = h(
      'div',
      { className: 'pn-header' },
      h('span', { className: 'pn-title' }, 'Paddle jobs'),
      this._connection,
      h('span', { className: 'pn-spacer' }),
      newJob,
      refresh
    );
    this.node.appendChild(header);
    this.node.appendChild(this._banner);
    this.node.appendChild(this.list.node);
    this.node.appendChild(this.detail.node);
    this.node.appendChild(this.form.node);
    // The version of the server extension (what actually runs the jobs), in a quiet footer;
    // hidden until known, and left hidden when the server extension is missing (the banner
    // says so).
    this._version = h('div', {
      className: 'pn-footer',
      'data-testid': 'paddle-version',
      hidden: true
    });
    this.node.appendChild(this._version);
    this.node.setAttribute('data-testid', 'paddle-panel');
    void this._loadVersion(api);
    // eslint-disable-next-line @typescript-eslint/unbound-method -- Lumino calls the slot with the thisArg passed beside it.
    model.changed.connect(this._onChange, this);
    this._onChange(model, model.state);
    this._setView('list');
  }

  private async _loadVersion(api: PaddleApi): Promise<void> {
    try {
      const { version, api: apiVersion } = await api.version();
      this._version.textContent = `paddle-nbext ${version}`;
      this._version.title = `paddle-nbext server extension ${version}, REST API ${apiVersion}`;
      this._version.hidden = false;
    } catch (error) {
      // A missing server extension is already explained by the banner.
      if (!(error instanceof ApiError && error.missingExtension)) {
        console.warn('paddle-nbext: version not loaded:', (error as Error).message);
      }
    }
  }

  openJob(name: string): void {
    const job = this.model.job(name);
    if (!job) {
      return;
    }
    this.detail.show(job);
    this._setView('detail');
  }

  showList(): void {
    this.detail.reset();
    this._setView('list');
    this.list.update(this.model.state);
  }

  async showForm(): Promise<void> {
    this.detail.reset();
    const config = this.model.config ?? (await this.model.loadConfig());
    this.form.reset(config);
    this._setView('form');
  }

  private _setView(view: View): void {
    this._view = view;
    this.list.node.hidden = view !== 'list';
    this.detail.node.hidden = view !== 'detail';
    this.form.node.hidden = view !== 'form';
    this.node.setAttribute('data-view', view);
  }

  private _onChange(_: JobsModel, state: IJobsState): void {
    const problem = state.problem;
    this._banner.hidden = !problem;
    this._banner.textContent = problem ? problem.message : '';
    this._banner.setAttribute('data-kind', problem?.kind ?? '');
    const labels = {
      connecting: 'connecting…',
      live: 'live',
      polling: 'reconnecting (polling)',
      stopped: ''
    };
    this._connection.textContent = labels[state.connection];
    this._connection.setAttribute('data-state', state.connection);
    if (this._view === 'list' || !this.isVisible) {
      this.list.update(state);
    }
    if (this._view === 'detail' && this.detail.name) {
      const job = state.jobs.get(this.detail.name);
      if (job) {
        this.detail.update(job);
      } else if (state.loaded) {
        this.showList();
      }
    }
  }

  protected onAfterShow(): void {
    this.list.update(this.model.state);
    this.list.tick();
    if (!this._ticker) {
      this._ticker = window.setInterval(() => this.list.tick(), 10000);
    }
  }

  protected onAfterHide(): void {
    window.clearInterval(this._ticker);
    this._ticker = 0;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    window.clearInterval(this._ticker);
    this.detail.stopLog();
    // eslint-disable-next-line @typescript-eslint/unbound-method -- Lumino calls the slot with the thisArg passed beside it.
    this.model.changed.disconnect(this._onChange, this);
    super.dispose();
  }
}
