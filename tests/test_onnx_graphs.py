"""graphs.py's bookkeeping without a GPU: the record of a run's host-to-device copies that a capture is served
from, and the refusal of a capture whose copies differ from the eager run's (the GPU tests capture for real)."""

from __future__ import annotations

import numpy as np
import pytest

from dmlcli.onnx_model.graphs import Uncapturable, Uploads


class _HostAsDevice:
    """Stands for CuPy: asarray makes a copy (a 'device' array)."""

    @staticmethod
    def asarray(array):
        return np.array(array, copy=True)


def test_a_capture_is_served_the_recorded_device_arrays_in_order():
    uploads = Uploads(_HostAsDevice())
    first, second = np.arange(3, dtype=np.int64), np.array([0.5], np.float32)
    recorded = [uploads.upload(first), uploads.upload(second)]
    uploads.replaying = 0
    assert uploads.upload(first.copy()) is recorded[0]
    assert uploads.upload(second.copy()) is recorded[1]
    assert uploads.replaying == 2


@pytest.mark.parametrize("changed", [np.arange(3, dtype=np.int32), np.array([0, 1, 5], np.int64),
                                     np.arange(4, dtype=np.int64)])
def test_a_copy_that_differs_from_the_record_ends_the_capture(changed):
    uploads = Uploads(_HostAsDevice())
    uploads.upload(np.arange(3, dtype=np.int64))
    uploads.replaying = 0
    with pytest.raises(Uncapturable, match="differs from the eager run's"):
        uploads.upload(changed)


def test_nan_payloads_count_as_bits():
    uploads = Uploads(_HostAsDevice())
    quiet = np.array([np.nan], np.float32)
    uploads.upload(quiet)
    uploads.replaying = 0
    other = quiet.view(np.uint32) | np.uint32(1)
    with pytest.raises(Uncapturable):
        uploads.upload(other.view(np.float32))


def test_a_copy_beyond_the_record_ends_the_capture():
    uploads = Uploads(_HostAsDevice())
    uploads.replaying = 0
    with pytest.raises(Uncapturable, match="copied 1 host arrays to the device, the eager run 0"):
        uploads.upload(np.zeros(1))


def test_the_cpu_backend_runs_every_call_eagerly():
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from dmlcli.onnx_model import OnnxSession

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    session = OnnxSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    feeds = {"x": np.array([-1, 0, 2], np.float32)}
    for _ in range(3):
        assert session.run(feeds)["y"].tolist() == [0, 0, 2]
    assert session.graph_state(feeds) == "eager: the CPU backend"
