"""An ordinary torchrun-style script (no mxrun module) for the --prestart tests
(tests/integration/prestart_test.cc). Its first line notes whether torch was imported before the
script ran, as it is in a pre-started interpreter, and the same of torch._dynamo (which DDP imports).
Each rank prints a "start" record (its pid, the attempt, those notes, __name__, sys.argv,
sys.path[0], RANK as keeps_rank_at_import kept it), joins a Gloo group, all-reduces rank+1 and
prints the "sum". In the first attempt the ranks then wait (the test SIGKILLs one); in a later
one they exit 0.
"""
import sys

preloaded = "torch" in sys.modules
dynamo_preloaded = "torch._dynamo" in sys.modules

import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import keeps_rank_at_import  # noqa: E402

attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
rank = int(os.environ["RANK"])
print(json.dumps({"event": "start", "rank": rank, "pid": os.getpid(), "attempt": attempt,
                  "preloaded": preloaded, "dynamo_preloaded": dynamo_preloaded,
                  "rank_at_import": keeps_rank_at_import.RANK_AT_IMPORT,
                  "name": __name__, "argv": sys.argv,
                  "path0": sys.path[0], "standby": os.environ.get("MXRUN_STANDBY")}), flush=True)
dist.init_process_group("gloo")
total = torch.tensor([rank + 1.0])
dist.all_reduce(total)
print(json.dumps({"event": "sum", "rank": rank, "attempt": attempt, "sum": total.item()}),
      flush=True)
if attempt == 0:
    time.sleep(120)
dist.destroy_process_group()
