"""The CASHG model (paper Sec. 3, appendix C): see :class:`cashg.model.cashg_model.CASHG`."""

from cashg.model.batch import CharSequenceBatch, SequenceSample, char_deltas, collate
from cashg.model.cashg_model import CASHG, ModelOutput, count_parameters
from cashg.model.gmm_head import MixtureParams

__all__ = [
    "CASHG", "CharSequenceBatch", "MixtureParams", "ModelOutput", "SequenceSample",
    "char_deltas", "collate", "count_parameters",
]
