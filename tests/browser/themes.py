"""JupyterLab's two themes in the browser suite: switching between them, and the contrast of
every visible text against the background it is painted on (WCAG AA, 4.5:1).  Shared by the
panel's and the widgets' tests, so each surface is judged by the same rule."""

from __future__ import annotations

from playwright.sync_api import Page

#: The suite's theme names and JupyterLab's.
THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}


def set_theme(page: Page, theme: str) -> None:
    """Switch the page's JupyterLab (started with `--LabApp.expose_app_in_browser=True`) to
    `theme` and wait until its variables apply."""
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.commands.hasCommand('apputils:change-theme')")
    page.evaluate("theme => window.jupyterapp.commands.execute('apputils:change-theme', { theme })", THEMES[theme])
    page.wait_for_function(
        "light => document.body.getAttribute('data-jp-theme-light') === light",
        arg="true" if theme == "light" else "false",
    )


def low_contrast_text(page: Page, selector: str) -> list[str]:
    """Text inside `selector` below WCAG AA (4.5:1) against the background it is painted on, from
    computed styles: the first ancestor with an opaque-enough background, colours with alpha
    blended over it (what axe does, and it also catches text axe skips as partly out of view).
    Text of disabled controls is exempt, as WCAG exempts inactive components."""
    return list(
        page.evaluate(
            """selector => {
                // rgb()/rgba() (0-255), or color(srgb ...) (0-1), which is what color-mix() computes to.
                const parse = c => { const m = c.match(/rgba?\\(([^)]+)\\)/) || c.match(/color\\(srgb ([^)]+)\\)/); if (!m) return null;
                    const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number); const k = c.startsWith('color(') ? 255 : 1;
                    return [p[0] * k, p[1] * k, p[2] * k, p.length > 3 ? p[3] : 1]; };
                const over = (top, under) => [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3])).concat(1);
                const lum = c => { const [r, g, b] = c.slice(0, 3).map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
                    return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
                const background = el => { const layers = [];
                    for (let at = el; at; at = at.parentElement) { const bg = parse(getComputedStyle(at).backgroundColor);
                        if (bg && bg[3] > 0) { layers.push(bg); if (bg[3] >= 1) break; } }
                    let colour = [255, 255, 255, 1]; for (const layer of layers.reverse()) colour = over(layer, colour); return colour; };
                const low = [];
                const roots = document.querySelectorAll(selector);
                if (!roots.length) return [`nothing matches ${selector}`];
                for (const root of roots) {
                    const texts = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
                    for (let node = texts.nextNode(); node; node = texts.nextNode()) {
                        const el = node.parentElement;
                        if (!node.textContent.trim() || !el || el.closest('[hidden], svg, option') || !el.getClientRects().length) continue;
                        const style = getComputedStyle(el);
                        if (style.visibility === 'hidden' || el.closest('button:disabled, input:disabled, select:disabled, textarea:disabled')) continue;
                        let opacity = 1; for (let at = el; at; at = at.parentElement) opacity *= Number(getComputedStyle(at).opacity);
                        const bg = background(el);
                        const fg = over([...parse(style.color).slice(0, 3), parse(style.color)[3] * opacity], bg);
                        const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
                        const ratio = (a + 0.05) / (b + 0.05);
                        if (ratio < 4.5) low.push(`${ratio.toFixed(2)}:1 "${node.textContent.trim().slice(0, 40)}" (${el.className || el.tagName}: ${style.color} on rgb(${bg.slice(0, 3).map(Math.round)}))`);
                    }
                }
                return [...new Set(low)];
            }""",
            selector,
        )
    )
