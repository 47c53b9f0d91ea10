"""A module that keeps RANK when it is imported, as Lightning's rank_zero_only does: imported ahead
by a pre-started interpreter (MXRUN_PRESTART_IMPORTS) it would keep the standby's nothing
(tests/integration/prestart_test.cc checks that mxrun starts such a rank afresh instead)."""
import os

RANK_AT_IMPORT = os.environ.get("RANK")
