"""Runs a script as `python SCRIPT ARGS...` would, after adding $MXRUN_TEST_SITE as a site
directory: its .pth files run and the entry points of its dist-info folders are found, as in an
environment where `pip install mxrun` put the wheel's mxrun-auto-progress.pth and entry_points.txt
(tests/integration/frameworks_test.cc makes that folder from python/)."""
import os
import runpy
import site
import sys

site.addsitedir(os.environ["MXRUN_TEST_SITE"])
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
runpy.run_path(sys.argv[0], run_name="__main__")
