"""A stand-in agent: writes what it was started with as JSON, then exits.

The file is named by OWL_TEST_ARGS_OUT, so every argument is the driver's.
Exit status: OWL_TEST_EXIT (default 0).
"""

import json
import os
import sys

with open(os.environ["OWL_TEST_ARGS_OUT"], "w", encoding="utf-8") as f:
    json.dump(
        {
            "argv": sys.argv[1:],
            "cwd": os.getcwd(),
            "env": {k: v for k, v in os.environ.items() if k.startswith("OWL_")},
        },
        f,
    )
sys.exit(int(os.environ.get("OWL_TEST_EXIT", "0")))
