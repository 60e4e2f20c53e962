"""The demo beside the library (a source checkout only; the wheel ships ``mx_sparse`` alone).

``examples/train_second.py`` is the main job (``bash run.sh train``); ``examples.detection``
holds what it needs beyond the library: the CenterPoint head, its targets and decoding, BEV
IoU, average precision, KITTI file reading, the non-learned cluster baseline, BEV pictures and
the atomic checkpoint writer. Import it from the repository root (``python -m pytest``,
``python -m bench`` and the scripts here put that root on ``sys.path``)."""
