#!/bin/sh
# Regenerates the committed example reports. Run from the repository root after
# building (tests/reports/report_examples_test.cc fails when they are stale):
#   sh reports/examples/refresh.sh [path/to/sextant]
set -e
sextant=${1:-build/tools/sextant}
"$sextant" report weak-scaling --spec configs/reports/megatron-weak-h100.yaml --out reports/examples/megatron-weak-h100
"$sextant" report strong-scaling --spec configs/reports/gpt3-175b-strong-h100.yaml --out reports/examples/gpt3-175b-strong-h100
"$sextant" report strong-scaling --spec configs/reports/gpt3-175b-strong-h100-tp8-pp12.yaml --out reports/examples/gpt3-175b-strong-h100-tp8-pp12
"$sextant" report weak-scaling --spec configs/reports/narayanan21-a100.yaml --out reports/examples/narayanan21-a100
"$sextant" report calibration --runs tests/data/calibration --out reports/examples/calibration
