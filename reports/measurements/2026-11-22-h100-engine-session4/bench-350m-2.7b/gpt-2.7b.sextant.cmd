.gpu-bin/sextant-b2 --configs /work/main/configs run --model gpt-2.7b --layout mbs=4,gbs=4 --data synthetic --steps 30 --format json
