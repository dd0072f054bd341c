"""openmla.flash_mla reads block tables by row stride, as FlashMLA does: the width a view is widened
to before it reaches the native decode (runs without a GPU; the GPU replay of an engine's narrow
CUDA-graph view is in test_gpu_flash_mla.py)."""

from __future__ import annotations

import numpy as np
import pytest

import openmla
from openmla import flash_mla

width_for = flash_mla._row_stride_width


def test_narrow_view_of_a_wider_buffer_widens_to_the_row_stride():
    # buffer [8, 20]; view [:4, :1] (a CUDA-graph capture with length 1)
    assert width_for(rows=4, width=1, row_stride=20, col_stride=1, storage_offset=0, storage_elems=160) == 20
    # every row of the buffer: the last row also ends at its row stride
    assert width_for(rows=8, width=1, row_stride=20, col_stride=1, storage_offset=0, storage_elems=160) == 20


def test_the_last_row_stops_at_the_end_of_the_storage():
    # view [:8, :1] of buffer[:, 3:]: the last row starts 3 elements in, 17 remain
    assert width_for(rows=8, width=1, row_stride=20, col_stride=1, storage_offset=3, storage_elems=160) == 17
    # a buffer of 150 elements whose rows are addressed with stride 20: the last row has 10
    assert width_for(rows=8, width=2, row_stride=20, col_stride=1, storage_offset=0, storage_elems=150) == 10


def test_layouts_without_room_keep_their_width():
    # contiguous table: nothing beyond the view
    assert width_for(rows=4, width=7, row_stride=7, col_stride=1, storage_offset=0, storage_elems=28) == 7
    # columns not contiguous (the decode rejects it with its own message)
    assert width_for(rows=4, width=2, row_stride=20, col_stride=2, storage_offset=0, storage_elems=160) == 2
    # rows overlapping (row stride below the width, e.g. a broadcast row)
    assert width_for(rows=4, width=5, row_stride=0, col_stride=1, storage_offset=0, storage_elems=5) == 5
    # empty view
    assert width_for(rows=0, width=3, row_stride=20, col_stride=1, storage_offset=0, storage_elems=160) == 3


@pytest.mark.parametrize("rows,cols,start_row,start_col", [(4, 1, 0, 0), (8, 2, 0, 0), (3, 1, 5, 0), (8, 1, 0, 3),
                                                           (1, 1, 7, 0), (2, 4, 2, 5)])
def test_widened_view_reads_exactly_the_buffer_rows(rows, cols, start_row, start_col):
    """The widened view over real memory: every row it gives is the buffer's row from the view's
    first column on, and it ends inside the buffer."""
    buffer = np.arange(8 * 20, dtype=np.int32).reshape(8, 20)
    view = buffer[start_row:start_row + rows, start_col:start_col + cols]
    itemsize = buffer.itemsize
    offset = (view.__array_interface__["data"][0] - buffer.__array_interface__["data"][0]) // itemsize
    bound = width_for(rows, cols, view.strides[0] // itemsize, view.strides[1] // itemsize, offset, buffer.size)
    assert bound >= cols
    widened = np.lib.stride_tricks.as_strided(view, shape=(rows, bound), strides=view.strides)
    last = offset + (rows - 1) * 20 + bound  # one past the last element the widened view reads
    assert last <= buffer.size
    for r in range(rows):
        np.testing.assert_array_equal(widened[r], buffer.reshape(-1)[offset + r * 20: offset + r * 20 + bound])
    if start_row + rows < 8:
        assert bound == 20  # rows below the view hold the rest of the last row's stride
    else:
        assert bound == 20 - start_col  # the storage ends with the buffer's last row


def test_get_mla_metadata_takes_flashmlas_earlier_keyword():
    with pytest.raises(ValueError, match="num_heads_per_head_k"):
        flash_mla.get_mla_metadata(None, 16, 1, num_heads_per_head_k=32)


def test_the_width_stays_within_what_an_int32_length_can_read():
    huge = 1 << 40
    assert width_for(rows=1, width=1, row_stride=huge, col_stride=1, storage_offset=0,
                     storage_elems=huge) == openmla.MAX_POOL_PAGES
