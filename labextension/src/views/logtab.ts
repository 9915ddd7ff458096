/** One replica's log in a main-area tab of its own ("Open in tab" in the job view). */
import { MainAreaWidget } from '@jupyterlab/apputils';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { PaddleApi } from '../api/client';
import { __ } from '../i18n';
import { IReplicaRef, LogPanel } from './logpanel';
import { rankKey, rankName, ranksPerTrainer } from '../logic/ranks';
import { IJobStatus, TERMINAL_PHASES } from '../api/types';

class LogTabContent extends Widget {
  readonly logs: LogPanel;
  private _shown = false;

  constructor(
    api: PaddleApi,
    job: IJobStatus,
    readonly replica: IReplicaRef,
    tail: number
  ) {
    super();
    this.addClass('pn-log-tab');
    this.logs = new LogPanel(api, job.name, { tail, follow: !TERMINAL_PHASES.has(job.phase) });
    this.logs.setReplicas(job.replicas, ranksPerTrainer(job.spec), Boolean(job.spec.requirements));
    this.logs.select(replica);
    this.node.appendChild(this.logs.node);
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    if (!this._shown) {
      this._shown = true;
      void this.logs.show();
    }
  }

  dispose(): void {
    this.logs.stop();
    super.dispose();
  }
}

export class LogTabWidget extends MainAreaWidget<LogTabContent> {
  constructor(api: PaddleApi, job: IJobStatus, replica: IReplicaRef, tail: number) {
    super({ content: new LogTabContent(api, job, replica, tail) });
    const name = rankName(replica);
    this.id = `paddle-nbext-log-${job.name}-${rankKey(replica)}`;
    this.title.label = __('%1 · %2 log', job.name, name);
    this.title.closable = true;
    this.node.setAttribute('data-testid', 'paddle-log-tab');
  }

  /** A new status of the job (the replica selector and "not started yet" follow it). */
  setJob(job: IJobStatus): void {
    this.content.logs.setReplicas(
      job.replicas,
      ranksPerTrainer(job.spec),
      Boolean(job.spec.requirements)
    );
  }
}
