"""SGLang's server with its FlashMLA backend on OpenMLA:

    python -m openmla.integrations.sglang.launch_server --model-path ... --attention-backend flashmla

takes exactly sglang.launch_server's arguments. Importing this module runs
openmla.integrations.sglang.install(), and then, as the main module, SGLang's own entry point.
SGLang's scheduler and worker processes get the patch too: a process started with the spawn
method imports its parent's main module (this one, not as "__main__") before anything else, and a
forked one inherits it. For SGLang versions with general plugins, OPENMLA_SGLANG=1 does the same
without this wrapper.
"""

from __future__ import annotations

import runpy

from . import install

install()

if __name__ == "__main__":
    # sys.modules["__main__"] stays this module, so that spawned workers import it (and install()).
    runpy.run_module("sglang.launch_server", run_name="__main__")
