"""Figures of the report: the papers' figures redrawn from ReFrame run reports, one
PNG each, one module per study (p000 ... p004, vcuda for P003's remoting
measurements), sharing common.  Every figure draws the medians over the repeats with
min..max bars (the numbers the tables print), indicative points hollow, the paper's
values marked (from analysis/claims.yaml, like the verdicts); a figure with nothing to
draw is one line of text saying why.  Each figure function returns (file or None,
note); figures() draws them all; cab_comm_table() is P002's table 3, remd_table()
P003's table 2, dlm_fault_table() P004's per-fault timing.  Used by report.py."""
from . import p000, p001, p002, p003, p004, vcuda
from .common import data, matching, size_label
from .p003 import remd_model
from .p000 import umb_fraction_figure, umb_halo_figure, umb_modes_figure, umb_stride_figure
from .p001 import (HIMENO_CLAIMS, himeno_figure, umb_baseline_figure, umb_migration_figure,
                   umb_patterns_figure)
from .p002 import (BACKEND_NAMES, P002_TABLE3, cab_comm_table, cab_npb_figure,
                   cab_pingpong_figure, npb_classes as _npb_classes)
from .p003 import (_remd_balance, _remd_comm, _remd_efficiency, _remd_fit, _remd_runs, remd_efficiency_figure,
                   remd_split_figure, remd_table)
from .p004 import dlm_engines_figure, dlm_fault_table, dlm_stencil_figure, dlm_stream_figure
from .vcuda import vcuda_copy_figure, vcuda_idle_figure

__all__ = ['figures', 'REGISTRY', 'p000', 'p001', 'p002', 'p003', 'p004', 'vcuda', 'data', 'matching', 'remd_model',
           'size_label', 'umb_fraction_figure', 'umb_halo_figure', 'umb_modes_figure', 'umb_stride_figure',
           'HIMENO_CLAIMS', 'himeno_figure', 'umb_baseline_figure', 'umb_migration_figure',
           'umb_patterns_figure', 'BACKEND_NAMES', 'P002_TABLE3', 'cab_comm_table', 'cab_npb_figure',
           'cab_pingpong_figure', '_npb_classes', '_remd_balance', '_remd_comm', '_remd_efficiency',
           '_remd_fit', '_remd_runs', 'remd_efficiency_figure', 'remd_split_figure', 'remd_table',
           'dlm_engines_figure', 'dlm_fault_table', 'dlm_stencil_figure', 'dlm_stream_figure',
           'vcuda_copy_figure', 'vcuda_idle_figure']

# In the report's order: P000, P001, P002, P003 (remoting, then remd), P004.
REGISTRY = p000.FIGURES + p001.FIGURES + p002.FIGURES + vcuda.FIGURES + p003.FIGURES + p004.FIGURES


def figures(cases, out_dir):
    """Draws every figure -> [{file, name, caption, note, checks}] (file None: not drawn,
    the note says why in one line)."""
    out = []
    for fn, sources, caption in REGISTRY:
        name, note = fn(cases, out_dir)
        size = size_label(matching(cases, sources))
        out.append({'file': name, 'name': fn.__name__.replace('_figure', '.png'),
                    'caption': caption + (f' [{size}]' if size else ''), 'note': note,
                    'checks': sorted({check for check, _ in sources})})
    return out
