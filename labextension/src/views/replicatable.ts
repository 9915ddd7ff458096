/**
 * The job view's replica table.  One row per replica; a trainer of several ranks says so in its
 * name cell (`3 ranks`, a toggle) and its rank rows, folded away until opened, follow it
 * indented, so 8 GPUs x 4 trainers never crowd a narrow view.  The rank the job's message blames
 * is marked failed with its words, and its trainer opens by itself.  A rank's Logs button shows
 * that rank's lines of its trainer's log.
 */
import { clear, h } from './dom';
import { phaseClass, replicaName, replicaReason } from '../logic/format';
import { __ } from '../i18n';
import { IReplicaRef, replicaKey } from './logpanel';
import { PREPARING_PHASE, shownReplicaPhase } from '../logic/preparing';
import { failedRankReason, replicaGroups } from '../logic/ranks';
import { IJobStatus, IReplica } from '../api/types';

/** A figure cell's role and its column's name, shown before it in a narrow view. */
const LABEL = {
  restarts: () => ({ role: 'cell', 'data-label': __('Restarts') }),
  ran: () => ({ role: 'cell', 'data-label': __('Ran') }),
  use: () => ({ role: 'cell', 'data-label': __('Use') })
};

/** What a Use cell shows without figures (a job that ended, a rank, resource use off). */
export const NO_USAGE = '—';

export interface IReplicaTableOptions {
  /** The reader asked for a replica's (or a rank's) log. */
  showLogs: (ref: IReplicaRef) => void;
  /** `ran 3m` words of a replica (they tick). */
  ranFor: (replica: IReplica) => string;
}

export class ReplicaTable {
  /** Trainers (`replicaKey`) whose rank rows the reader opened (or the failure opened). */
  readonly expanded = new Set<string>();
  /** Trainers the reader closed: a failure does not open them again. */
  private readonly _closed = new Set<string>();

  constructor(
    readonly body: HTMLTableSectionElement,
    private readonly _options: IReplicaTableOptions
  ) {}

  render(job: IJobStatus): void {
    clear(this.body);
    for (const group of replicaGroups(job)) {
      const replica = group.replica;
      const key = replicaKey(replica);
      const name = replicaName(replica.role, replica.index);
      const shown = shownReplicaPhase(job, replica);
      if (group.failed !== null && !this._closed.has(key)) {
        this.expanded.add(key);
      }
      const open = this.expanded.has(key);
      const nameCell = h('th', { scope: 'row', role: 'rowheader' }, name);
      const rankRows: HTMLElement[] = [];
      if (group.ranks > 1) {
        const toggle = h(
          'button',
          {
            className: 'pn-link pn-ranks-toggle',
            type: 'button',
            'data-testid': 'paddle-replica-ranks',
            'aria-expanded': open ? 'true' : 'false',
            'aria-label': __('%1 ranks of %2', group.ranks, name),
            title: open ? __('Hide the ranks') : __('Show each rank')
          },
          `${open ? '▾' : '▸'} ${__('%1 ranks', group.ranks)}`
        );
        toggle.addEventListener('click', () => {
          if (this.expanded.delete(key)) {
            this._closed.add(key);
          } else {
            this.expanded.add(key);
            this._closed.delete(key);
          }
          this.render(job);
        });
        nameCell.appendChild(h('br'));
        nameCell.appendChild(toggle);
        for (let rank = 0; open && rank < group.ranks; rank++) {
          rankRows.push(this._rankRow(job, replica, rank, group.failed));
        }
      }
      this.body.appendChild(
        h(
          'tr',
          {
            'data-testid': 'paddle-replica-row',
            'data-replica': key,
            'data-phase': replica.phase,
            role: 'row'
          },
          nameCell,
          ...this._cells(
            shown,
            shown === PREPARING_PHASE ? job.message : replicaReason(replica, job.phase),
            replica,
            h('td', { className: 'pn-usage', ...LABEL.use() }, NO_USAGE),
            this._logsButton(name, { role: replica.role, index: replica.index })
          )
        )
      );
      for (const row of rankRows) {
        this.body.appendChild(row);
      }
    }
  }

  /**
   * One rank (process) of a trainer of several.  A rank has no status of its own: it is in its
   * trainer's phase, except that the rank that failed the trainer is Failed and the others were
   * stopped with it; its restarts and run time are its trainer's (no cell is left empty).
   */
  private _rankRow(
    job: IJobStatus,
    replica: IReplica,
    rank: number,
    failedRank: number | null
  ): HTMLElement {
    const ref = { role: replica.role, index: replica.index, rank };
    const failed = failedRank === rank;
    const stopped = !failed && failedRank !== null;
    const phase = failed ? 'Failed' : stopped ? 'Stopped' : shownReplicaPhase(job, replica);
    let reason: string;
    if (failed) {
      reason = failedRankReason(job, replica.index);
    } else if (stopped) {
      reason = __('Stopped when rank %1 failed', failedRank);
    } else {
      reason = phase === PREPARING_PHASE ? job.message : replicaReason(replica, job.phase);
    }
    const name = `${replicaName(replica.role, replica.index)} · ${__('rank %1', rank)}`;
    return h(
      'tr',
      {
        className: 'pn-rank-row',
        role: 'row',
        'data-testid': 'paddle-rank-row',
        'data-rank-of': replicaKey(replica),
        'data-rank': rank,
        'data-failed': failed ? 'true' : 'false'
      },
      h('th', { scope: 'row', role: 'rowheader', 'aria-label': name }, __('rank %1', rank)),
      ...this._cells(
        phase,
        reason,
        replica,
        h(
          'td',
          {
            className: 'pn-usage',
            title: __('Resource use is measured per trainer: see its row'),
            ...LABEL.use()
          },
          NO_USAGE
        ),
        this._logsButton(name, ref)
      )
    );
  }

  /**
   * A row's cells after its name: phase, reason, restarts, run time, use and the Logs button.
   * Each figure carries its column's name (`data-label`), which a narrow view shows before it
   * when the rows are laid out as blocks (style/base.css).
   */
  private _cells(
    phase: string,
    reason: string,
    replica: IReplica,
    usage: HTMLElement,
    logs: HTMLElement
  ): HTMLElement[] {
    return [
      h('td', { role: 'cell' }, h('span', { className: `pn-badge ${phaseClass(phase)}` }, phase)),
      h('td', { className: 'pn-reason', role: 'cell' }, reason),
      h('td', { className: 'pn-restarts', ...LABEL.restarts() }, String(replica.restarts)),
      h('td', { className: 'pn-ran', ...LABEL.ran() }, this._options.ranFor(replica)),
      usage,
      h('td', { className: 'pn-logs', role: 'cell' }, logs)
    ];
  }

  private _logsButton(name: string, ref: IReplicaRef): HTMLElement {
    const logs = h(
      'button',
      {
        className: 'pn-button pn-small',
        type: 'button',
        'data-testid': 'paddle-replica-logs',
        'aria-label': __('Logs of %1', name)
      },
      __('Logs')
    );
    logs.addEventListener('click', () => this._options.showLogs(ref));
    return logs;
  }
}
