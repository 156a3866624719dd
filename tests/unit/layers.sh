#!/bin/sh
# The rooms of src/ include one way only (tools/layers.py; README "Source layout").
command -v python3 >/dev/null || { echo "skip: python3 not installed"; exit 77; }
exec python3 "$(dirname "$0")/../../tools/layers.py"
