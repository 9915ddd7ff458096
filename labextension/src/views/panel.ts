/**
 * The left-sidebar panel: a JupyterLab toolbar (New job, refresh, connection dot), a banner for
 * problems, and the job list (or the New job form).  A job opens in the main area; this panel
 * stays the list.
 */
import {
  LabIcon,
  Toolbar,
  addIcon,
  addToolbarButtonClass,
  refreshIcon
} from '@jupyterlab/ui-components';
import { Panel, Widget } from '@lumino/widgets';

import { ApiError, PaddleApi } from '../api/client';
import { deleteJobs } from './bulkdelete';
import { h } from './dom';
import { IFormPrefill } from '../logic/prefill';
import { JobFormView } from './formview';
import { __ } from '../i18n';
import { JobListView } from './listview';
import { JobsModel } from '../state/model';
import { IJobsState } from '../state/state';

// A paddle blade over a stack of job rows: not the Table of Contents' lines.
const ICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">' +
  '<g class="jp-icon3" fill="#616161">' +
  '<path d="M17.3 2.2a3 3 0 0 1 4.3 4.2l-3.1 3.2a3 3 0 0 1-3.2.7l-4.6 4.6-1.6-1.6 4.6-4.6a3 3 0 0 1 .7-3.2z"/>' +
  '<rect x="2" y="15" width="9" height="2.6" rx="1"/><rect x="2" y="19.4" width="14" height="2.6" rx="1"/>' +
  '<circle cx="4.5" cy="11" r="2"/></g></svg>';

export const paddleIcon = new LabIcon({ name: 'paddle-nbext:jobs', svgstr: ICON_SVG });

type View = 'list' | 'form';

export interface IPanelOptions {
  model: JobsModel;
  api: PaddleApi;
  /** Open (or bring to front) a job's view in the main area. */
  /** Open a job's view: in the preview tab, or (`keep`) in a tab of its own. */
  openJob: (name: string, keep?: boolean) => void;
  /** What the New job form starts with when opened from the toolbar (the file browser's folder). */
  formPrefill?: () => IFormPrefill;
}

/**
 * A toolbar icon button as a native `<button>` named by its tooltip (JupyterLab's
 * `ToolbarButton` renders a custom element carrying `aria-pressed`, which axe reports).
 */
export function iconButton(
  icon: LabIcon,
  label: string,
  testid: string,
  onClick: () => void | Promise<void>
): Widget {
  const button = h('button', {
    type: 'button',
    className: 'jp-ToolbarButtonComponent pn-icon-button',
    title: label,
    'aria-label': label,
    'data-testid': testid
  });
  button.appendChild(icon.element({ tag: 'span', className: 'jp-ToolbarButtonComponent-icon' }));
  button.addEventListener('click', () => void onClick());
  return addToolbarButtonClass(new Widget({ node: h('div', {}, button) }));
}

/** The connection as a coloured dot with its state in words for screen readers and hover. */
class ConnectionDot extends Widget {
  constructor() {
    super({ node: h('span', { className: 'pn-connection', 'data-testid': 'paddle-connection' }) });
  }

  set state(state: IJobsState['connection']) {
    const labels = {
      connecting: __('connecting…'),
      live: __('live'),
      polling: __('reconnecting (polling)'),
      stopped: ''
    };
    this.node.setAttribute('data-state', state);
    this.node.title = labels[state] ? __('Job updates: %1', labels[state]) : '';
    this.node.textContent = '';
    this.node.appendChild(h('span', { className: 'pn-dot', 'aria-hidden': 'true' }));
    this.node.appendChild(h('span', { className: 'pn-sr-only' }, labels[state]));
  }
}

export class PaddlePanel extends Panel {
  readonly list: JobListView;
  readonly form: JobFormView;
  readonly toolbar: Toolbar;
  private readonly _body: Widget;
  private readonly _banner: HTMLElement;
  private readonly _connection = new ConnectionDot();
  private readonly _version: HTMLElement;
  private readonly _live: HTMLElement;
  private _view: View = 'list';
  private _ticker = 0;
  private readonly _model: JobsModel;
  private readonly _formPrefill: () => IFormPrefill;

  constructor(options: IPanelOptions) {
    super();
    const { model, api } = options;
    this._model = model;
    this._formPrefill = options.formPrefill ?? (() => ({}));
    this.id = 'paddle-nbext-panel';
    this.addClass('pn-panel');
    this.title.icon = paddleIcon;
    this.title.caption = __('Paddle jobs');
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', __('Paddle jobs'));
    this._live = h('div', {
      className: 'pn-sr-only',
      'aria-live': 'polite',
      'data-testid': 'paddle-announce'
    });
    this.list = new JobListView(
      (name, keep) => options.openJob(name, keep),
      text => this.announce(text),
      names => void this._deleteEnded(api, names)
    );
    this.form = new JobFormView(
      api,
      () => this.showList(),
      job => {
        model.dispatch({ type: 'job', job });
        this.showList();
        options.openJob(job.name, true); // the job just submitted stays open
      }
    );
    this.toolbar = new Toolbar();
    this.toolbar.addClass('pn-toolbar');
    const title = new Widget({ node: h('span', { className: 'pn-title' }, __('Paddle jobs')) });
    this.toolbar.addItem('title', title);
    this.toolbar.addItem('connection', this._connection);
    this.toolbar.addItem('spacer', Toolbar.createSpacerItem());
    this.toolbar.addItem(
      'new-job',
      iconButton(addIcon, __('New job: submit a distributed Paddle job'), 'paddle-new-job', () =>
        this.showForm()
      )
    );
    this.toolbar.addItem(
      'refresh',
      iconButton(refreshIcon, __('Reload the job list and reconnect'), 'paddle-refresh', () =>
        model.retry()
      )
    );
    this._banner = h('div', {
      className: 'pn-banner',
      'data-testid': 'paddle-banner',
      hidden: true
    });
    // The version of the server extension (what actually runs the jobs), in a quiet footer;
    // hidden until known, and left hidden when the server extension is missing (the banner
    // says so).
    this._version = h('div', {
      className: 'pn-footer',
      'data-testid': 'paddle-version',
      hidden: true
    });
    this._body = new Widget({
      node: h(
        'div',
        { className: 'pn-panel-body' },
        this._banner,
        this.list.node,
        this.form.node,
        this._version,
        this._live
      )
    });
    this.addWidget(this.toolbar);
    this.addWidget(this._body);
    this.node.setAttribute('data-testid', 'paddle-panel');
    void this._loadVersion(api);
    // eslint-disable-next-line @typescript-eslint/unbound-method -- Lumino calls the slot with the thisArg passed beside it.
    model.changed.connect(this._onChange, this);
    this._onChange(model, model.state);
    this._setView('list');
  }

  get view(): View {
    return this._view;
  }

  /** Say something once to screen readers (the panel's one polite live region). */
  announce(text: string): void {
    this._live.textContent = text;
  }

  /** Delete ended…: one question, then the deletes; the list follows from the event stream. */
  private async _deleteEnded(api: PaddleApi, names: string[]): Promise<void> {
    for (const name of await deleteJobs(api, names)) {
      this._model.dispatch({ type: 'deleted', name });
    }
  }

  private async _loadVersion(api: PaddleApi): Promise<void> {
    try {
      const { version, api: apiVersion } = await api.version();
      this._version.textContent = `paddle-nbext ${version}`;
      this._version.title = __(
        'paddle-nbext server extension %1, REST API %2',
        version,
        apiVersion
      );
      this._version.hidden = false;
    } catch (error) {
      // A missing server extension is already explained by the banner.
      if (!(error instanceof ApiError && error.missingExtension)) {
        console.warn('paddle-nbext: version not loaded:', (error as Error).message);
      }
    }
  }

  showList(): void {
    this._setView('list');
    this.list.update(this._model.state);
  }

  async showForm(prefill: IFormPrefill = this._formPrefill()): Promise<void> {
    const config = this._model.config ?? (await this._model.loadConfig());
    this.form.reset(config, prefill);
    this._setView('form');
    this.form.focusFirst();
  }

  private _setView(view: View): void {
    this._view = view;
    this.list.node.hidden = view !== 'list';
    this.form.node.hidden = view !== 'form';
    this.node.setAttribute('data-view', view);
  }

  private _onChange(_: JobsModel, state: IJobsState): void {
    const problem = state.problem;
    this._banner.hidden = !problem;
    this._banner.textContent = problem ? problem.message : '';
    this._banner.setAttribute('data-kind', problem?.kind ?? '');
    this._connection.state = state.connection;
    this.list.update(state);
  }

  protected onAfterShow(): void {
    this.list.update(this._model.state);
    this.list.tick();
    if (!this._ticker) {
      // Every second: ages under a minute read in seconds ("5s"), and a 10 s tick made them
      // jump by ten.  A tick rewrites only the ages whose text changed.
      this._ticker = window.setInterval(() => this.list.tick(), 1000);
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
    // eslint-disable-next-line @typescript-eslint/unbound-method -- Lumino calls the slot with the thisArg passed beside it.
    this._model.changed.disconnect(this._onChange, this);
    super.dispose();
  }
}
