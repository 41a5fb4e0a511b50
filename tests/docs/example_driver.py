"""The python process of one documentation page (run by tests/docs/run_examples.py through
``python -c``, this file's path as ``argv[2]``, in the page's scratch directory: ``import
polybag`` is the one of the interpreter under test and ``sys.path[0]`` is the scratch
directory, as in a REPL).

Protocol: one JSON line per block on stdin (``{"code": ..., "name": ...}``); for each, one
JSON line on the file descriptor given as ``argv[1]`` (``{"stdout": ..., "error": ...}``).
The blocks share one globals dict, like the cells of a notebook.  Each block's stdout is
captured at the file-descriptor level (so a subprocess's output counts too); stderr goes
wherever the runner sent it."""

from __future__ import annotations

import json
import linecache
import os
import sys
import tempfile
import traceback


def main() -> None:
    out = os.fdopen(int(sys.argv[1]), "w", encoding="utf-8")
    namespace: dict[str, object] = {"__name__": "__main__", "__builtins__": __builtins__}
    sys.argv = [""]
    for line in sys.stdin:
        request = json.loads(line)
        error = None
        # the block's lines for the traceback
        linecache.cache[request["name"]] = (len(request["code"]), None, request["code"].splitlines(True), request["name"])
        with tempfile.TemporaryFile() as capture:
            sys.stdout.flush()
            saved = os.dup(1)
            os.dup2(capture.fileno(), 1)
            try:
                exec(compile(request["code"], request["name"], "exec"), namespace)  # noqa: S102
            except BaseException as e:  # noqa: BLE001 - every failure (SystemExit too) is reported
                # the traceback from the block's own frames (not this driver's)
                error = "".join(traceback.format_exception(type(e), e, e.__traceback__.tb_next if e.__traceback__ else None))
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                except Exception:  # noqa: BLE001 - a block may have closed or replaced them
                    pass
                os.dup2(saved, 1)
                os.close(saved)
            capture.seek(0)
            text = capture.read().decode("utf-8", errors="replace")
        out.write(json.dumps({"stdout": text, "error": error}) + "\n")
        out.flush()


main()
