"""The widgets' look in JupyterLab's light and dark themes, from the theme's own CSS variables.

ipywidgets only fades a disabled button (opacity 0.6), which on the dark theme's near-black page
leaves a disabled Submit as blue as an enabled one.  Inside our widgets a disabled button drops
its style colour as JupyterLab's own disabled controls do: the neutral layout colour, the theme's
"disabled" text level (`--jp-ui-font-color3`), no shadow, a not-allowed cursor.  Text colours
come from the theme too: `--jp-error-color1` is the theme's red that reads on its own background
(#d32f2f on white, #f44336 on #111), where one fixed red fails on one of them.

The rules travel in a `<style>` inside each widget (`stylesheet()`), scoped by `ROOT_CLASS`, so
they apply wherever the widget is shown (JupyterLab, Notebook 7) without a separate install.
"""

from __future__ import annotations

import ipywidgets as widgets

#: The class every paddle-nbext widget's outer box carries; the rules below are scoped to it.
ROOT_CLASS = "paddle-nbext-widget"
#: Error text: the theme's red, with the light theme's value where no theme is loaded.
ERROR_COLOUR = "var(--jp-error-color1, #d32f2f)"
#: Warning text: the theme's orange darkened (light) or lightened (dark) toward its text colour,
#: since neither theme's orange alone reads as text on its background (#e65100 on white: 3.8:1).
WARN_COLOUR = "color-mix(in srgb, var(--jp-warn-color0, #e65100) 70%, var(--jp-ui-font-color0, #000))"
#: Secondary text (a peak beside the figures, a reason instead of them).
MUTED_COLOUR = "var(--jp-ui-font-color2, rgba(0, 0, 0, 0.54))"

_CSS = f"""
.{ROOT_CLASS} .jupyter-button:disabled {{
  opacity: 1;
  background-color: var(--jp-layout-color2);
  color: var(--jp-ui-font-color3);
  box-shadow: none;
  cursor: not-allowed;
}}
.{ROOT_CLASS} .paddle-usage-list {{ margin: 2px 0; padding: 0; list-style: none; }}
.{ROOT_CLASS} .paddle-usage-list li {{ display: flex; flex-wrap: wrap; align-items: center; gap: 6px; }}
.{ROOT_CLASS} .paddle-usage-name {{ min-width: 6em; font-weight: 600; }}
.{ROOT_CLASS} .paddle-usage-text {{ font-variant-numeric: tabular-nums; }}
.{ROOT_CLASS} .paddle-usage-peak, .{ROOT_CLASS} .paddle-usage-ranks,
.{ROOT_CLASS} .paddle-usage-unavailable {{ color: {MUTED_COLOUR}; }}
.{ROOT_CLASS} .paddle-usage-ranks {{ flex-basis: 100%; padding-left: 6em; }}
.{ROOT_CLASS} .paddle-usage-bar {{
  display: inline-block; width: 48px; height: 6px; vertical-align: middle;
  border: var(--jp-border-width, 1px) solid var(--jp-border-color1, #bdbdbd);
  background: var(--jp-layout-color2, #eee);
}}
.{ROOT_CLASS} .paddle-usage-fill {{ display: block; height: 100%; background: var(--jp-brand-color1, #1976d2); }}
.{ROOT_CLASS} .paddle-usage-high .paddle-usage-fill {{ background: var(--jp-warn-color1, #f57c00); }}
"""


def error_html(text_html: str) -> str:
    """Already escaped `text_html` in the theme's error colour."""
    return f"<span class='paddle-error' style='color:{ERROR_COLOUR}'>{text_html}</span>"


def stylesheet() -> widgets.HTML:
    """The rules as a widget to put among a view's children (it takes no room)."""
    sheet = widgets.HTML(value=f"<style>{_CSS}</style>", layout=widgets.Layout(display="none"))
    sheet.add_class("paddle-stylesheet")
    return sheet


def themed(box: widgets.Box) -> None:
    """Mark `box` as one of ours, so the rules apply inside it."""
    box.add_class(ROOT_CLASS)
