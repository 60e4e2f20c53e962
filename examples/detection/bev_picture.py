"""Bird's-eye-view pictures of detections: the frame's points, ground-truth boxes (dashed)
and predicted boxes (solid, with their scores), one colour per class. Needs matplotlib."""
import numpy as np

from .bev_iou import bev_corners

CLASS_COLOURS = ("tab:blue", "tab:red", "tab:green")


def draw_boxes(ax, boxes, classes, style, scores=None, ignore=None):
    """Footprints of ``boxes`` [N, 7] on ``ax``; ignored ground truth is drawn grey."""
    corners = bev_corners(np.asarray(boxes).reshape(-1, 7))
    for k, (c, cls) in enumerate(zip(corners, np.asarray(classes))):
        colour = "0.6" if ignore is not None and ignore[k] else CLASS_COLOURS[int(cls) % len(CLASS_COLOURS)]
        loop = np.vstack([c, c[:1]])
        ax.plot(loop[:, 0], loop[:, 1], style, color=colour, lw=1.0)
        if scores is not None:
            ax.text(c[:, 0].max() + 0.3, c[:, 1].max(), f"{scores[k]:.2f}", color=colour, fontsize=5)


def save_bev_picture(path, points, gt, pred, class_names, point_cloud_range, title=""):
    """One PNG: points (height-shaded), ground truth ``gt`` (dict boxes/classes/ignore) dashed,
    predictions ``pred`` (dict boxes/scores/classes) solid with scores."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    x0, y0, _, x1, y1, _ = point_cloud_range
    fig, ax = plt.subplots(figsize=(7.0, 7.0 * (y1 - y0) / (x1 - x0) + 0.6))
    ax.scatter(points[:, 0], points[:, 1], s=0.08, color="0.35", linewidths=0, rasterized=True)
    draw_boxes(ax, gt["boxes"], gt["classes"], "--", ignore=gt["ignore"])
    draw_boxes(ax, pred["boxes"], pred["classes"], "-", scores=pred["scores"])
    handles = [Line2D([], [], color=c, label=n) for n, c in zip(class_names, CLASS_COLOURS)]
    handles += [Line2D([], [], color="k", ls="--", label="ground truth"),
                Line2D([], [], color="k", label="detection (score)"),
                Line2D([], [], color="0.6", ls="--", label="ignored (< min points)")]
    ax.legend(handles=handles, loc="upper left", fontsize=6, ncol=2)
    ax.set(xlim=(x0, x1), ylim=(y0, y1), xlabel="x (m, forward)", ylabel="y (m, left)", title=title)
    ax.set_aspect("equal")
    ax.title.set_fontsize(8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
