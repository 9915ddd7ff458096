/**
 * The job view's training health (issue 36), one widget for the view's `healthSlot`: the
 * timeline under the header, then resource use per replica.  Also fills the replica table's
 * "Use" cells (`JobView.onReplicasRendered`).
 */
import { Panel } from '@lumino/widgets';

import { PaddleApi } from '../api/client';
import { ITimelineViewOptions, TimelineView } from './timelineview';
import { IUsageViewOptions, UsageView } from './usageview';

export interface IHealthViewOptions {
  api: Pick<PaddleApi, 'usage' | 'timeline'>;
  model: ITimelineViewOptions['model'] & IUsageViewOptions['model'];
  name: string;
  /** The replica table's body (its rows get the figures in their `.pn-usage` cells). */
  replicaRows?: () => HTMLElement | null;
}

export class HealthView extends Panel {
  readonly timeline: TimelineView;
  readonly usage: UsageView;

  constructor(options: IHealthViewOptions) {
    super();
    this.addClass('pn-health-view');
    this.timeline = new TimelineView(options);
    this.usage = new UsageView(options);
    this.addWidget(this.timeline);
    this.addWidget(this.usage);
  }
}
