.gpu-bin/sextant --configs /work/main/configs run --model gpt-6.7b --layout mbs=1,gbs=1 --data synthetic --steps 20 --format json
