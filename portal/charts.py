"""Charts: Plotly figures built on the server, drawn in the browser by ``static/js/charts.js``.

The server builds a :class:`plotly.graph_objects.Figure` with the ``plotly`` package and
serializes it with :func:`plotly.io.to_json` (validated against plotly's schema); the page
puts that JSON in a ``data-figure`` attribute (``templates/portal/includes/chart.html``) and
our static ``charts.js`` calls ``Plotly.newPlot`` on it with ``plotly.min.js`` served from
our own static files (``vendor/plotly/``, the copy bundled in the same ``plotly`` package,
so figure JSON and the drawing library are always the same version; no CDN).

Use on a page::

    # view / selector
    chart = bar_chart(chart_id="quota-a100", title="a100: quota, usage, fair share",
                      categories=["team-a", "team-b"],
                      series=[Series("Nominal quota", [8, 4]), Series("Usage", [6, 5])],
                      y_title="GPUs", sentences=["team-b is 1 GPU below its fair share"])

    {# template #}
    {% include "portal/includes/chart.html" with chart=chart %}
    ...
    {% block scripts %}{% include "portal/includes/chart_scripts.html" %}{% endblock %}

Nothing here touches the database; build the inputs with a selector first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import plotly.graph_objects as go
import plotly.io as pio

__all__ = [
    "PALETTE",
    "Chart",
    "Series",
    "bar_chart",
    "base_layout",
    "chart_from_figure",
    "heatmap_chart",
    "line_chart",
]

#: Trace colours, in order (colour-blind safe: Okabe & Ito, 2008).
PALETTE: tuple[str, ...] = (
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
)

#: Plotly config passed to ``Plotly.newPlot`` (the JS adds ``responsive: true``).
CONFIG: dict[str, object] = {"displaylogo": False, "responsive": True}


@dataclass(frozen=True)
class Chart:
    """One figure ready for ``templates/portal/includes/chart.html``.

    Fields:
        chart_id: the HTML id of the figure's container (unique on the page; DNS-ish).
        title: a heading shown above the figure (text, not drawn by Plotly).
        figure_json: the figure as JSON text (``{"data": [...], "layout": {...},
            "config": {...}}``) from :func:`plotly.io.to_json`; the template puts it in
            the container's ``data-figure`` attribute (HTML-escaped by Django).
        sentences: plain-English lines shown under the figure, saying what it shows.
        empty: ``True`` when there is nothing to draw; the template then shows
            ``empty_text`` instead of the figure.
        empty_text: what to say when ``empty``.
    """

    chart_id: str
    title: str
    figure_json: str
    sentences: tuple[str, ...] = ()
    empty: bool = False
    empty_text: str = "No data yet."


@dataclass(frozen=True)
class Series:
    """One named series of a chart.

    Fields:
        name: legend entry.
        values: one number per category / x value (``None`` = gap: no data, never 0).
        color: a CSS colour; default: the next colour of :data:`PALETTE`.
        text: optional per-point labels shown on hover (same length as ``values``).
        kind: for :func:`bar_chart` only: ``"bar"`` (default) or ``"marker"`` (drawn as
            a marker on top of the bars, e.g. a fair-share level).
    """

    name: str
    values: Sequence[float | int | None]
    color: str | None = None
    text: Sequence[str] | None = None
    kind: str = "bar"
    extra: dict = field(default_factory=dict)
    """More trace properties passed to plotly as they are (e.g. ``{"opacity": 0.6}``)."""


def base_layout(*, y_title: str = "", x_title: str = "", height: int = 340) -> dict:
    """The layout every portal chart shares: no Plotly theme (small JSON), our font,
    a legend above the plot, tight margins. ``height`` in CSS pixels."""
    return {
        "template": "none",
        "height": height,
        "margin": {"l": 60, "r": 20, "t": 30, "b": 50},
        "font": {"family": "system-ui, -apple-system, 'Segoe UI', sans-serif", "size": 13,
                 "color": "#1d2330"},
        "legend": {"orientation": "h", "x": 0, "y": 1.12},
        "xaxis": {"title": {"text": x_title}, "automargin": True},
        "yaxis": {"title": {"text": y_title}, "automargin": True, "rangemode": "tozero",
                  "gridcolor": "#e3e7ee", "zeroline": True, "zerolinecolor": "#c8cfdb"},
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
    }


def _color(series: Series, index: int) -> str:
    return series.color or PALETTE[index % len(PALETTE)]


def chart_from_figure(
    fig: go.Figure,
    *,
    chart_id: str,
    title: str,
    sentences: Sequence[str] = (),
    empty: bool = False,
    empty_text: str = "No data yet.",
) -> Chart:
    """Wrap any Plotly figure as a :class:`Chart`.

    Plotly validates a figure as it is built (a property it does not know raises
    :class:`ValueError` on the server, not silently in the browser); the figure is
    serialized by plotly's own JSON encoder (:func:`plotly.io.json.to_json_plotly`, what
    :func:`plotly.io.to_json` uses) with :data:`CONFIG` added under ``"config"``.
    """
    # Figures validate their properties as they are built; to_json_plotly encodes
    # numpy, Decimal and datetime values the way plotly.io.to_json does.
    text = pio.json.to_json_plotly({**fig.to_plotly_json(), "config": dict(CONFIG)})
    return Chart(chart_id=chart_id, title=title, figure_json=text,
                 sentences=tuple(sentences), empty=empty, empty_text=empty_text)


def bar_chart(
    *,
    chart_id: str,
    title: str,
    categories: Sequence[str],
    series: Sequence[Series],
    y_title: str = "",
    x_title: str = "",
    sentences: Sequence[str] = (),
    barmode: str = "group",
    empty_text: str = "No data yet.",
    height: int = 340,
) -> Chart:
    """A grouped (or ``barmode="stack"``) bar chart: one bar per category per series.

    Shapes: ``categories`` are the x labels (e.g. team slugs); each series has one value
    per category. A series with ``kind="marker"`` is drawn as a dash marker at its value
    over each category's bars (a level such as fair share), not as a bar. Empty when
    there are no categories. Raises :class:`ValueError` when a series' length differs
    from the categories'.
    """
    fig = go.Figure(layout=base_layout(y_title=y_title, x_title=x_title, height=height))
    for i, s in enumerate(series):
        if len(s.values) != len(categories):
            raise ValueError(f"series {s.name!r}: {len(s.values)} values for "
                             f"{len(categories)} categories")
        common = {"x": list(categories), "y": list(s.values), "name": s.name}
        if s.text is not None:
            common["text"] = list(s.text)
            common["hovertemplate"] = "%{x}: %{y}<br>%{text}<extra>" + s.name + "</extra>"
        if s.kind == "marker":
            fig.add_trace(go.Scatter(mode="markers", marker={
                "symbol": "line-ew-open", "size": 36, "line": {"width": 3, "color": _color(s, i)},
                "color": _color(s, i)}, **common, **s.extra))
        else:
            fig.add_trace(go.Bar(marker={"color": _color(s, i)}, **common, **s.extra))
    fig.update_layout(barmode=barmode)
    return chart_from_figure(fig, chart_id=chart_id, title=title, sentences=sentences,
                             empty=not categories, empty_text=empty_text)


def line_chart(
    *,
    chart_id: str,
    title: str,
    x: Sequence,
    series: Sequence[Series],
    y_title: str = "",
    x_title: str = "",
    y_range: tuple[float, float] | None = None,
    sentences: Sequence[str] = (),
    empty_text: str = "No data yet.",
    height: int = 300,
) -> Chart:
    """A line chart over ``x`` (datetimes or numbers), one line per series.

    ``None`` values are gaps (no data), never drawn as 0. ``y_range`` fixes the y axis
    (e.g. ``(0, 1)`` for an index or a ratio). Empty when ``x`` is empty. Raises
    :class:`ValueError` when a series' length differs from ``x``'s.
    """
    fig = go.Figure(layout=base_layout(y_title=y_title, x_title=x_title, height=height))
    for i, s in enumerate(series):
        if len(s.values) != len(x):
            raise ValueError(f"series {s.name!r}: {len(s.values)} values for {len(x)} x values")
        fig.add_trace(go.Scatter(x=list(x), y=list(s.values), name=s.name, mode="lines+markers",
                                 line={"color": _color(s, i)}, connectgaps=False, **s.extra))
    if y_range is not None:
        fig.update_yaxes(range=list(y_range), rangemode="normal")
    return chart_from_figure(fig, chart_id=chart_id, title=title, sentences=sentences,
                             empty=not x, empty_text=empty_text)


def heatmap_chart(
    *,
    chart_id: str,
    title: str,
    x: Sequence,
    y: Sequence[str],
    z: Sequence[Sequence[float | None]],
    z_title: str = "",
    z_range: tuple[float, float] | None = None,
    sentences: Sequence[str] = (),
    empty_text: str = "No data yet.",
    colorscale: str = "Blues",
    height: int | None = None,
) -> Chart:
    """A heatmap: ``z[row][col]`` for ``y[row]`` (e.g. teams) by ``x[col]`` (e.g. days).

    ``None`` cells are left blank (no data). ``z_range`` fixes the colour scale (e.g.
    ``(0, 1)`` for efficiency). The height grows with the number of rows unless given.
    Empty when there are no rows or columns. Raises :class:`ValueError` on a ragged ``z``.
    """
    if len(z) != len(y) or any(len(row) != len(x) for row in z):
        raise ValueError("heatmap: z must have one row per y value and one column per x value")
    rows_height = height or max(200, 80 + 28 * len(y))
    fig = go.Figure(layout=base_layout(height=rows_height))
    heat = {"x": list(x), "y": list(y), "z": [list(r) for r in z], "colorscale": colorscale,
            "colorbar": {"title": {"text": z_title}}, "hoverongaps": False}
    if z_range is not None:
        heat.update(zmin=z_range[0], zmax=z_range[1])
    fig.add_trace(go.Heatmap(**heat))
    fig.update_yaxes(rangemode="normal", gridcolor=None, autorange="reversed")
    return chart_from_figure(fig, chart_id=chart_id, title=title, sentences=sentences,
                             empty=not (x and y), empty_text=empty_text)
