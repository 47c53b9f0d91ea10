# The version of the mxrun this package belongs to: CMakeLists.txt's project(VERSION), checked
# against `mxrun --version` by tests/python/test_against_mxrun.py.
__version__ = "0.1.0"
