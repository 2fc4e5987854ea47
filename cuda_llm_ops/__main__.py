"""`python -m cuda_llm_ops ...` is `llm-speed ...`."""
import sys

from .cli import main

sys.exit(main())
