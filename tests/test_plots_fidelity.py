"""The fidelity figure draws one point per published number around the y = x line."""
import numpy as np
import pandas as pd

from helpers.plots.fidelity import plot_sim_vs_published


def _comparison() -> pd.DataFrame:
    return pd.DataFrame({"metric": ["output_throughput", "mean_ttft_ms", "mean_tpot_ms"],
                         "split": ["fit", "held_out", "fit"], "published": [500.0, 64.0, 7.4],
                         "simulated": [450.0, 32.0, 8.6]}).assign(
        error=lambda d: d["simulated"] / d["published"] - 1)


def test_one_point_per_row_on_log_axes_with_the_median_error_in_the_title() -> None:
    fig = plot_sim_vs_published({"defaults": _comparison(), "calibrated": _comparison()})
    assert len(fig.axes) == 2
    ax = fig.axes[0]
    points = np.concatenate([c.get_offsets() for c in ax.collections if len(c.get_offsets()) and
                             c.get_label().endswith(")")])
    assert sorted(map(tuple, points)) == sorted(zip(_comparison()["published"], _comparison()["simulated"]))
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert "median |error| 16% (all rows), held out 50%" in ax.get_title()  # |error| 10 %, 50 %, 16 %


def test_the_band_and_the_lines_are_the_lessons_targets() -> None:
    from helpers.lessons.fidelity import TARGET_MAX_RATIO, TARGET_MEDIAN_ABS_ERROR

    fig = plot_sim_vs_published({"defaults": _comparison()})
    ax = fig.axes[0]
    band = next(c for c in ax.collections if c.get_label().startswith("±"))
    assert band.get_label() == f"±{TARGET_MEDIAN_ABS_ERROR:.0%}".replace("%", " %")
    x, y_upper = band.get_paths()[0].vertices[:, 0], band.get_paths()[0].vertices[:, 1]
    assert np.isclose(y_upper.max() / x.max(), 1 + TARGET_MEDIAN_ABS_ERROR)
    slopes = sorted(round(float(line.get_ydata()[0] / line.get_xdata()[0]), 6) for line in ax.get_lines()
                    if line.get_linestyle() == ":")
    assert slopes == [round(1 / TARGET_MAX_RATIO, 6), round(TARGET_MAX_RATIO, 6)]
