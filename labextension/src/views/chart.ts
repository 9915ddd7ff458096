/**
 * A small line chart in plain SVG: several lines over shared axes (one per trainer), a legend
 * with each line's latest value, the values of every line at the hovered step, and a linear or
 * logarithmic y axis.
 *
 * Plain SVG rather than a charting library: the panel draws at most a few thousand points per
 * chart, which SVG polylines redraw in well under a frame; it themes itself with JupyterLab's CSS
 * variables like the rest of the panel; and it adds nothing to the extension's bundle.
 */
import { clear, h } from './dom';
import { __ } from '../i18n';

const SVG = 'http://www.w3.org/2000/svg';
/** The drawing's own coordinates (it scales to its box). */
const WIDTH = 600;
const HEIGHT = 220;
const MARGIN = { left: 56, right: 12, top: 10, bottom: 24 };

/** One colour per trainer, cycled; the kernel-side sparkline uses the same order. */
export const COLOURS = [
  '#2b6cb0',
  '#dd6b20',
  '#2f855a',
  '#c53030',
  '#6b46c1',
  '#b7791f',
  '#319795',
  '#d53f8c'
];

export type Scale = 'linear' | 'log';

/** What the x axis counts: training steps, or seconds since the run started (wall time). */
export type XAxis = 'step' | 'time';

export interface ILine {
  name: string;
  x: number[];
  y: number[];
  /** The line's own colour (a compared job's); else one of `COLOURS` by its position. */
  colour?: string;
}

/** A line's colour: its own, else the palette's by position. */
function colourOf(line: ILine, n: number): string {
  return line.colour ?? COLOURS[n % COLOURS.length];
}

/** `45s`, `3m 20s`, `1h 5m`: a wall-time tick or hover label. */
export function secondsText(seconds: number): string {
  const whole = Math.max(0, Math.round(seconds));
  const hours = Math.floor(whole / 3600);
  const minutes = Math.floor((whole % 3600) / 60);
  const secs = whole % 60;
  if (hours) {
    return minutes ? `${hours}h ${minutes}m` : `${hours}h`;
  }
  if (minutes) {
    return secs ? `${minutes}m ${secs}s` : `${minutes}m`;
  }
  return `${secs}s`;
}

function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: { [name: string]: string | number } = {}
): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) {
    node.setAttribute(name, String(value));
  }
  return node;
}

/** Round numbers between `low` and `high` for axis ticks (about `count` of them). */
export function niceTicks(low: number, high: number, count = 4): number[] {
  if (!Number.isFinite(low) || !Number.isFinite(high)) {
    return [];
  }
  if (high <= low) {
    return [low];
  }
  const rough = (high - low) / count;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map(m => m * power).find(s => s >= rough) ?? rough;
  const ticks: number[] = [];
  for (let t = Math.ceil(low / step) * step; t <= high + step * 1e-9; t += step) {
    ticks.push(Number(t.toPrecision(12)));
  }
  return ticks;
}

/** Durations a wall-time axis ticks at: seconds, minutes and hours a reader counts in. */
const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600];

/** Round durations (seconds) between `low` and `high` for a wall-time axis (about `count`). */
export function timeTicks(low: number, high: number, count = 5): number[] {
  if (!Number.isFinite(low) || !Number.isFinite(high) || high <= low) {
    return niceTicks(low, high, count);
  }
  const rough = (high - low) / count;
  const step = TIME_STEPS.find(s => s >= rough);
  if (step === undefined) {
    return niceTicks(low / 3600, high / 3600, count).map(hours => hours * 3600);
  }
  const ticks: number[] = [];
  for (let t = Math.ceil(low / step) * step; t <= high; t += step) {
    ticks.push(t);
  }
  return ticks;
}

/** Compact tick and value text: `0.0123`, `1.2e-5`, `12k`. */
export function formatValue(value: number): string {
  if (value === 0) {
    return '0';
  }
  const size = Math.abs(value);
  if (size >= 1e5 || size < 1e-3) {
    return value.toExponential(1).replace('e+', 'e');
  }
  return Number(value.toPrecision(3)).toString();
}

/** Index of the point of sorted `xs` nearest to `x`. */
export function nearest(xs: number[], x: number): number {
  let low = 0;
  let high = xs.length - 1;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (xs[mid] < x) {
      low = mid + 1;
    } else {
      high = mid;
    }
  }
  if (low > 0 && Math.abs(xs[low - 1] - x) <= Math.abs(xs[low] - x)) {
    return low - 1;
  }
  return low;
}

export class LineChart {
  readonly node: HTMLElement;
  private readonly _svg: SVGSVGElement;
  private readonly _plot: SVGGElement;
  private readonly _hover: SVGGElement;
  private readonly _legend: HTMLElement;
  private readonly _tooltip: HTMLElement;
  private readonly _note: HTMLElement;
  private _lines: ILine[] = [];
  private _marks: number[] = [];
  private _scale: Scale = 'linear';
  private _axis: XAxis = 'step';
  private _x: [number, number] = [0, 1];
  private _y: [number, number] = [0, 1];

  constructor(readonly title: string) {
    this._svg = svg('svg', {
      viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
      class: 'pn-chart-svg',
      role: 'img'
    });
    this._plot = svg('g');
    this._hover = svg('g', { class: 'pn-chart-hover' });
    this._svg.append(this._plot, this._hover);
    this._legend = h('ul', { className: 'pn-chart-legend', 'data-testid': 'paddle-chart-legend' });
    this._tooltip = h('div', {
      className: 'pn-chart-tooltip',
      'data-testid': 'paddle-chart-tooltip',
      role: 'status',
      hidden: true
    });
    this._note = h('p', { className: 'pn-chart-note', hidden: true });
    this.node = h(
      'figure',
      { className: 'pn-chart', 'data-testid': 'paddle-chart', 'data-metric': title },
      h('div', { className: 'pn-chart-box' }, this._tooltip),
      this._legend,
      this._note
    );
    this.node.firstElementChild!.prepend(this._svg);
    this._svg.addEventListener('mousemove', event => this._onHover(event));
    this._svg.addEventListener('mouseleave', () => this._hideHover());
  }

  get scale(): Scale {
    return this._scale;
  }

  /** Points drawn (after the log scale dropped values that are not positive). */
  get pointCount(): number {
    return this._plot.querySelectorAll('polyline').length
      ? this._lines.reduce((sum, line) => sum + this._visible(line).length, 0)
      : 0;
  }

  setScale(scale: Scale): void {
    if (scale !== this._scale) {
      this._scale = scale;
      this.render();
    }
  }

  get axis(): XAxis {
    return this._axis;
  }

  /** Count the x axis in steps, or in wall time (the lines' x then are seconds). */
  setXAxis(axis: XAxis): void {
    if (axis !== this._axis) {
      this._axis = axis;
      this.render();
    }
  }

  private _xText(x: number): string {
    return this._axis === 'time' ? secondsText(x) : String(x);
  }

  /** The lines, and the steps where the job restarted (a dashed rule each). */
  setLines(lines: ILine[], marks: number[] = []): void {
    this._lines = lines;
    this._marks = marks;
    this.render();
  }

  private _transform(value: number): number {
    return this._scale === 'log' ? Math.log10(value) : value;
  }

  private _visible(line: ILine): number[] {
    const kept: number[] = [];
    for (let i = 0; i < line.x.length; i++) {
      const y = line.y[i];
      if (Number.isFinite(y) && (this._scale === 'linear' || y > 0)) {
        kept.push(i);
      }
    }
    return kept;
  }

  private _px(x: number): number {
    const [x0, x1] = this._x;
    const span = x1 - x0 || 1;
    return MARGIN.left + ((x - x0) / span) * (WIDTH - MARGIN.left - MARGIN.right);
  }

  private _py(y: number): number {
    const [y0, y1] = this._y;
    const span = y1 - y0 || 1;
    return (
      HEIGHT -
      MARGIN.bottom -
      ((this._transform(y) - y0) / span) * (HEIGHT - MARGIN.top - MARGIN.bottom)
    );
  }

  /** Redraw everything from the lines (one pass per line; a few thousand points stay well under a frame). */
  render(): void {
    clear(this._plot);
    this._hideHover();
    const visible = this._lines.map(line => this._visible(line));
    let x0 = Infinity;
    let x1 = -Infinity;
    let y0 = Infinity;
    let y1 = -Infinity;
    this._lines.forEach((line, n) => {
      for (const i of visible[n]) {
        x0 = Math.min(x0, line.x[i]);
        x1 = Math.max(x1, line.x[i]);
        const y = this._transform(line.y[i]);
        y0 = Math.min(y0, y);
        y1 = Math.max(y1, y);
      }
    });
    const hidden = this._lines.some((line, n) => visible[n].length < line.x.length);
    this._note.hidden = !hidden;
    this._note.textContent = hidden
      ? __('Values that are not positive are not shown on a log scale.')
      : '';
    if (x0 > x1) {
      this._svg.setAttribute('aria-label', __('%1: no points yet', this.title));
      this._renderLegend();
      return;
    }
    if (y1 === y0) {
      y0 -= 0.5;
      y1 += 0.5;
    }
    const pad = (y1 - y0) * 0.05;
    this._x = [x0, x1];
    this._y = [y0 - pad, y1 + pad];
    this._renderAxes();
    for (const step of this._marks) {
      if (step < x0 || step > x1) {
        continue;
      }
      const x = this._px(step).toFixed(1);
      const rule = svg('line', {
        x1: x,
        x2: x,
        y1: MARGIN.top,
        y2: HEIGHT - MARGIN.bottom,
        class: 'pn-chart-restart',
        'stroke-dasharray': '4 3',
        'vector-effect': 'non-scaling-stroke',
        'data-testid': 'paddle-chart-restart',
        'data-step': step
      });
      rule.appendChild(svg('title')).textContent = __('restarted: resumed at step %1', step);
      this._plot.appendChild(rule);
    }
    this._lines.forEach((line, n) => {
      const points = visible[n].map(
        i => `${this._px(line.x[i]).toFixed(1)},${this._py(line.y[i]).toFixed(1)}`
      );
      const polyline = svg('polyline', {
        points: points.join(' '),
        fill: 'none',
        stroke: colourOf(line, n),
        'stroke-width': 1.5,
        'vector-effect': 'non-scaling-stroke',
        'data-line': line.name
      });
      this._plot.appendChild(polyline);
    });
    const latest = this._lines
      .map(line => (line.y.length ? `${line.name} ${formatValue(line.y[line.y.length - 1])}` : ''))
      .filter(Boolean)
      .join(', ');
    this._svg.setAttribute(
      'aria-label',
      this._axis === 'time'
        ? __('%1 by wall time; latest: %2', this.title, latest)
        : __('%1 by step; latest: %2', this.title, latest)
    );
    this._renderLegend();
  }

  private _renderAxes(): void {
    const axis = svg('g', { class: 'pn-chart-axis' });
    const [x0, x1] = this._x;
    const [y0, y1] = this._y;
    const yTicks =
      this._scale === 'log'
        ? niceTicks(Math.ceil(y0), Math.floor(y1), 4)
            .filter(Number.isInteger)
            .map(p => 10 ** p)
        : niceTicks(y0, y1, 4);
    for (const tick of yTicks) {
      const y = this._py(tick);
      axis.appendChild(
        svg('line', {
          x1: MARGIN.left,
          x2: WIDTH - MARGIN.right,
          y1: y,
          y2: y,
          class: 'pn-chart-grid'
        })
      );
      const label = svg('text', { x: MARGIN.left - 6, y: y + 4, 'text-anchor': 'end' });
      label.textContent = formatValue(tick);
      axis.appendChild(label);
    }
    const xTicks = this._axis === 'time' ? timeTicks(x0, x1, 5) : niceTicks(x0, x1, 5);
    for (const tick of xTicks.filter(Number.isInteger)) {
      const x = this._px(tick);
      const label = svg('text', { x, y: HEIGHT - 6, 'text-anchor': 'middle' });
      label.textContent = this._xText(tick);
      axis.appendChild(label);
    }
    axis.appendChild(
      svg('line', {
        x1: MARGIN.left,
        x2: WIDTH - MARGIN.right,
        y1: HEIGHT - MARGIN.bottom,
        y2: HEIGHT - MARGIN.bottom,
        class: 'pn-chart-frame'
      })
    );
    this._plot.appendChild(axis);
  }

  private _renderLegend(): void {
    clear(this._legend);
    this._lines.forEach((line, n) => {
      const last = line.y.length ? formatValue(line.y[line.y.length - 1]) : '–';
      this._legend.appendChild(
        h(
          'li',
          { 'data-line': line.name },
          h('span', {
            className: 'pn-chart-swatch',
            style: `background:${colourOf(line, n)}`,
            'aria-hidden': 'true'
          }),
          `${line.name} `,
          h('span', { className: 'pn-chart-latest' }, last)
        )
      );
    });
  }

  /** Show every line's value at the step nearest to the pointer. */
  showAt(step: number): void {
    clear(this._hover);
    const rows: HTMLElement[] = [];
    this._lines.forEach((line, n) => {
      if (!line.x.length) {
        return;
      }
      const i = nearest(line.x, step);
      const y = line.y[i];
      if (!Number.isFinite(y) || (this._scale === 'log' && y <= 0)) {
        return;
      }
      this._hover.appendChild(
        svg('circle', {
          cx: this._px(line.x[i]),
          cy: this._py(y),
          r: 3,
          fill: colourOf(line, n)
        })
      );
      // One row per line with its colour; a line's own step only where it is not the hovered one.
      const own =
        line.x[i] === step
          ? ''
          : this._axis === 'time'
            ? ` ${__('(at %1)', secondsText(line.x[i]))}`
            : ` ${__('(step %1)', line.x[i])}`;
      rows.push(
        h(
          'div',
          { className: 'pn-chart-tooltip-row' },
          h('span', {
            className: 'pn-chart-swatch',
            style: `background:${colourOf(line, n)}`,
            'aria-hidden': 'true'
          }),
          `${line.name}: ${formatValue(y)}${own}`
        )
      );
    });
    if (!rows.length) {
      this._hideHover();
      return;
    }
    const x = this._px(step);
    this._hover.prepend(
      svg('line', {
        x1: x,
        x2: x,
        y1: MARGIN.top,
        y2: HEIGHT - MARGIN.bottom,
        class: 'pn-chart-rule'
      })
    );
    clear(this._tooltip);
    this._tooltip.append(
      h(
        'div',
        { className: 'pn-chart-tooltip-step' },
        this._axis === 'time' ? __('at %1', secondsText(step)) : __('step %1', step)
      ),
      ...rows
    );
    this._tooltip.hidden = false;
  }

  private _onHover(event: MouseEvent): void {
    const box = this._svg.getBoundingClientRect();
    if (!box.width) {
      return;
    }
    const x = ((event.clientX - box.left) / box.width) * WIDTH;
    const [x0, x1] = this._x;
    const fraction = (x - MARGIN.left) / (WIDTH - MARGIN.left - MARGIN.right);
    this.showAt(Math.round(x0 + Math.min(1, Math.max(0, fraction)) * (x1 - x0)));
  }

  private _hideHover(): void {
    clear(this._hover);
    this._tooltip.hidden = true;
  }
}
