"""portal.charts: figure JSON built on the server, the include that carries it, the static files."""

import datetime
import html
import json
import re

import pytest
from django.contrib.staticfiles import finders
from django.template.loader import render_to_string

from portal.charts import Series, bar_chart, heatmap_chart, line_chart


def _figure(chart):
    return json.loads(chart.figure_json)


def test_bar_chart_carries_the_values_and_a_marker_series():
    chart = bar_chart(
        chart_id="quota-a100", title="a100", categories=["team-a", "team-b"],
        series=[Series("Nominal quota", [8, 4]), Series("Usage", [6, 5]),
                Series("Fair share", [6.5, 3.5], kind="marker")],
        y_title="GPUs", sentences=["team-b is 1 GPU above its fair share"],
    )
    fig = _figure(chart)
    assert [t["type"] for t in fig["data"]] == ["bar", "bar", "scatter"]
    assert fig["data"][0] == {"marker": {"color": "#0072B2"}, "name": "Nominal quota",
                              "x": ["team-a", "team-b"], "y": [8, 4], "type": "bar"}
    assert fig["data"][2]["y"] == [6.5, 3.5]
    assert fig["data"][2]["mode"] == "markers"
    assert fig["layout"]["barmode"] == "group"
    assert fig["layout"]["yaxis"]["title"]["text"] == "GPUs"
    assert fig["config"] == {"displaylogo": False, "responsive": True}
    assert chart.sentences == ("team-b is 1 GPU above its fair share",)
    assert chart.empty is False


def test_bar_chart_without_categories_is_empty_and_lengths_must_match():
    assert bar_chart(chart_id="c", title="t", categories=[], series=[]).empty is True
    with pytest.raises(ValueError, match="'Usage': 1 values for 2 categories"):
        bar_chart(chart_id="c", title="t", categories=["a", "b"], series=[Series("Usage", [1])])


def test_line_chart_keeps_gaps_and_serializes_datetimes():
    when = [datetime.datetime(2025, 3, 1, 12, 0, tzinfo=datetime.UTC),
            datetime.datetime(2025, 3, 1, 12, 5, tzinfo=datetime.UTC)]
    chart = line_chart(chart_id="jain", title="Jain", x=when,
                       series=[Series("a100", [0.9, None])], y_range=(0, 1))
    fig = _figure(chart)
    assert fig["data"][0]["x"] == ["2025-03-01T12:00:00+00:00", "2025-03-01T12:05:00+00:00"]
    assert fig["data"][0]["y"] == [0.9, None]
    assert fig["data"][0]["connectgaps"] is False
    assert fig["layout"]["yaxis"]["range"] == [0, 1]
    assert line_chart(chart_id="j", title="t", x=[], series=[]).empty is True


def test_heatmap_checks_its_shape():
    chart = heatmap_chart(chart_id="h", title="t", x=["d1", "d2"], y=["team-a"],
                          z=[[0.5, None]], z_range=(0, 1))
    fig = _figure(chart)
    assert fig["data"][0]["z"] == [[0.5, None]]
    assert (fig["data"][0]["zmin"], fig["data"][0]["zmax"]) == (0, 1)
    with pytest.raises(ValueError, match="one row per y value"):
        heatmap_chart(chart_id="h", title="t", x=["d1"], y=["a", "b"], z=[[1]])


def test_unknown_plotly_property_fails_on_the_server():
    with pytest.raises(ValueError, match="not_a_property"):
        bar_chart(chart_id="c", title="t", categories=["a"],
                  series=[Series("s", [1], extra={"not_a_property": 1})])


def test_include_puts_escaped_figure_json_in_data_figure_and_sentences_below():
    chart = bar_chart(chart_id="quota-a100", title="<a100>", categories=['team "a"'],
                      series=[Series("Usage", [3])], sentences=["team-a & co <b>"])
    out = render_to_string("portal/includes/chart.html", {"chart": chart})
    attr = re.search(r'id="quota-a100" data-figure="([^"]*)"', out).group(1)
    assert json.loads(html.unescape(attr)) == json.loads(chart.figure_json)
    assert "&lt;a100&gt;" in out
    assert "<li>team-a &amp; co &lt;b&gt;</li>" in out


def test_include_shows_the_empty_text_instead_of_a_figure():
    chart = bar_chart(chart_id="c", title="t", categories=[], series=[], empty_text="No quota.")
    out = render_to_string("portal/includes/chart.html", {"chart": chart})
    assert "data-figure" not in out
    assert "No quota." in out


def test_scripts_are_served_from_our_static_files_not_a_cdn():
    out = render_to_string("portal/includes/chart_scripts.html")
    assert re.findall(r'src="([^"]+)"', out) == ["/static/vendor/plotly/plotly.min.js",
                                                 "/static/js/charts.js"]
    assert finders.find("vendor/plotly/plotly.min.js")
    assert finders.find("js/charts.js")
