/opt/torch/.venv/bin/python3 /work/main/tools/bench/torch_reference.py --model /work/main/configs/models/gpt-2.7b.yaml --mbs 4 --steps 30 --warmup 10 --mode bf16 --peak-flops 989400000000000.0 --json
