"""Reference run: mbrl-lib 0.2.0's own MBPO on gymnasium Hopper-v4 at MBPO's Hopper settings.

Runs ``mbrl.algorithms.mbpo.train`` from the PyPI package ``mbrl==0.2.0``
(facebookresearch/mbrl-lib) with the settings of the original MBPO code (jannerm/mbpo:
examples/config/hopper/0.py, examples/development/base.py, mbpo/models/constructor.py)
instead of mbrl-lib's own conf/overrides/mbpo_hopper.yaml. CPU, one torch thread.
Every evaluation (10 deterministic episodes, policy mean action) appends one JSON line to
``<out>/evals.jsonl``: step (real env steps so far, the 5000 random initial steps included),
return_mean, length_mean, returns, lengths.

The PyPI ``mbrl`` name clashes with this repository's package, so it runs in its own venv:

    ~/.pyenv/versions/3.11.7/bin/python -m venv ~/mbrllib-ref/venv
    ~/mbrllib-ref/venv/bin/pip install torch==2.13.0  # the CPU wheel in /opt/wheels
    ~/mbrllib-ref/venv/bin/pip install --no-deps mbrl==0.2.0
    ~/mbrllib-ref/venv/bin/pip install gymnasium==0.26.3 mujoco==2.3.3 numpy==1.26.4 \
        hydra-core==1.3.2 omegaconf==2.3.0 termcolor==3.3.0 tqdm==4.70.1 imageio==2.38.1

mbrl 0.2.0 pins hydra-core==1.0.3 / omegaconf<2.1, which do not work on Python 3.11. With
hydra 1.3, ``instantiate`` is recursive by default, which breaks mbrl-lib's agent config
(``_target_: gym.env.Box``) and its model config (``activation_fn_cfg`` must stay a config),
so both set ``_recursive_: false``, which is what hydra 1.0 did. mujoco 2.3.4+ rejects
gymnasium 0.26.3's hopper.xml ("global coordinates no longer supported"), hence 2.3.3.

    OMP_NUM_THREADS=1 nohup nice -n 5 ~/mbrllib-ref/venv/bin/python \
        ~/mbrllib-ref/run_mbpo_hopper.py --seed 0 --steps 10000 --out ~/mbrllib-ref/runs/seed_0 \
        > ~/mbrllib-ref/runs/seed_0.out 2>&1 &

``--steps`` counts all real env steps, the initial 5000 included (mbrl-lib's ``num_steps``
counts only the steps after them). ``--debug`` is a quick smoke test (300 initial steps,
200-step epochs, model training every 100 steps, 700 steps in all).
"""

import argparse
import json
import os
import time

import numpy as np
import omegaconf
import torch

# mbrl here is mbrl-lib (the venv above), not this repository's package.
import mbrl.algorithms.mbpo as mbpo
import mbrl.util.common
import mbrl.util.env


def make_cfg(seed: int, steps: int, debug: bool) -> omegaconf.DictConfig:
    init_steps = 300 if debug else 5000  # MBPO base.py: n_initial_exploration_steps 5000
    epoch_length = 200 if debug else 1000  # MBPO hopper/0.py: epoch_length 1000
    freq_train_model = 100 if debug else 250  # MBPO hopper/0.py: model_train_freq 250
    steps = 700 if debug else steps
    return omegaconf.OmegaConf.create(
        {
            "seed": seed,
            "device": "cpu",
            "log_frequency_agent": 1000,  # mbrl-lib main.yaml
            "save_video": False,
            "debug_mode": False,
            "algorithm": {
                "name": "mbpo",
                "normalize": True,
                "normalize_double_precision": True,  # mbrl-lib default
                "target_is_delta": True,  # MBPO: the model predicts next_obs - obs
                "learned_rewards": True,  # MBPO: the model predicts the reward too
                "freq_train_model": freq_train_model,
                "real_data_ratio": 0.05,  # MBPO hopper/0.py: real_ratio 0.05
                "sac_samples_action": True,  # MBPO: model rollouts use stochastic actions
                "initial_exploration_steps": init_steps,
                "random_initial_explore": True,  # MBPO: uniform random initial policy
                "num_eval_episodes": 10,  # MBPO hopper/0.py uses 1; 10 for a steadier mean
                "dataset_size": steps,  # keep every real transition (MBPO pool: 1e6)
                "agent": {
                    "_target_": "mbrl.third_party.pytorch_sac_pranz24.sac.SAC",
                    "_recursive_": False,  # hydra 1.0 behaviour, see the docstring
                    "num_inputs": "???",
                    "action_space": {"low": "???", "high": "???", "shape": "???"},
                    "args": {
                        "gamma": 0.99,  # MBPO hopper/0.py: discount
                        "tau": 0.005,  # MBPO hopper/0.py: tau
                        "alpha": 1.0,  # MBPO: log_alpha starts at 0
                        "policy": "Gaussian",
                        "target_update_interval": 1,  # MBPO base.py
                        "automatic_entropy_tuning": True,  # MBPO: learned alpha
                        "target_entropy": -1,  # MBPO hopper/0.py: target_entropy -1
                        "hidden_size": 256,  # MBPO base.py: M = 256, two hidden layers
                        "device": "cpu",
                        "lr": 3e-4,  # MBPO base.py: lr 3e-4 (policy, Q and alpha)
                    },
                },
            },
            "dynamics_model": {
                "_target_": "mbrl.models.GaussianMLP",
                "_recursive_": False,  # hydra 1.0 behaviour, see the docstring
                "device": "cpu",
                "num_layers": 4,  # MBPO constructor.py: 4 hidden swish layers of 200
                "in_size": "???",
                "out_size": "???",
                "ensemble_size": 7,  # MBPO hopper/0.py: num_networks 7
                "hid_size": 200,
                "deterministic": False,  # MBPO hopper/0.py: deterministic False
                "propagation_method": "random_model",  # MBPO: a random elite per sample
                "learn_logvar_bounds": False,  # mbrl-lib default; MBPO learns them
                "activation_fn_cfg": {"_target_": "torch.nn.SiLU"},  # swish
            },
            "overrides": {
                "env": "gym___Hopper-v4",
                "term_fn": "hopper",
                "learned_rewards": True,
                "num_steps": steps - init_steps,  # mbrl-lib counts steps after init
                "epoch_length": epoch_length,
                "num_elites": 5,  # MBPO hopper/0.py: num_elites 5
                "patience": 5,  # MBPO bnn.py: stop after 5 epochs without improvement
                "model_lr": 1e-3,  # MBPO constructor.py: Adam lr 1e-3
                # MBPO decays weights per layer (2.5e-5, 5e-5, 7.5e-5, 7.5e-5, 1e-4);
                # mbrl-lib has one Adam weight_decay for all parameters: its 1e-5 is kept.
                "model_wd": 1e-5,
                "model_batch_size": 256,  # MBPO mbpo.py: _train_model(batch_size=256)
                "validation_ratio": 0.2,  # MBPO mbpo.py: holdout_ratio 0.2
                "freq_train_model": freq_train_model,
                # 400 x 250 = 100 000 rollouts per model training (MBPO rollout_batch_size)
                "effective_model_rollouts_per_step": 400,
                # MBPO paper, Hopper: k 1 -> 15 over epochs 20 -> 100. hopper/0.py, and
                # FlowMBPO, have 150: the same length 1 up to step 31 000 (these runs: 10 000)
                "rollout_schedule": [20, 100, 1, 15],
                "num_sac_updates_per_step": 20,  # MBPO hopper/0.py: n_train_repeat 20
                "sac_updates_every_steps": 1,  # MBPO hopper/0.py: train_every_n_steps 1
                "num_epochs_to_retain_sac_buffer": 1,  # MBPO hopper/0.py: model_retain_epochs
                "sac_batch_size": 256,  # MBPO base.py: sampler batch_size 256
            },
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=10000, help="real env steps, init included")
    parser.add_argument("--out", default="runs/debug")
    parser.add_argument("--debug", action="store_true")
    args = parser.parse_args()

    torch.set_num_threads(1)
    np.random.seed(args.seed)  # as mbrl-lib's examples/main.py
    torch.manual_seed(args.seed)
    cfg = make_cfg(args.seed, args.steps, args.debug)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.yaml"), "w") as f:
        f.write(omegaconf.OmegaConf.to_yaml(cfg))

    # Count every real env step (the initial random steps go through the same function).
    counter = {"steps": 0, "t": time.time()}
    step_env = mbrl.util.common.step_env_and_add_to_buffer

    def counting_step_env(*a, **kw):
        counter["steps"] += 1
        if counter["steps"] % 100 == 0:
            now = time.time()
            print(f"step {counter['steps']} ({now - counter['t']:.1f} s / 100 steps)", flush=True)
            counter["t"] = now
        return step_env(*a, **kw)

    mbrl.util.common.step_env_and_add_to_buffer = counting_step_env

    def timed(name, fn):
        def wrapper(*a, **kw):
            t = time.time()
            out = fn(*a, **kw)
            print(f"{name} at step {counter['steps']}: {time.time() - t:.1f} s", flush=True)
            return out

        return wrapper

    mbrl.util.common.train_model_and_save_model_and_data = timed(
        "model training", mbrl.util.common.train_model_and_save_model_and_data
    )
    mbpo.rollout_model_and_populate_sac_buffer = timed(
        "model rollouts", mbpo.rollout_model_and_populate_sac_buffer
    )

    # mbrl-lib's evaluate, plus episode lengths and a JSON line per evaluation.
    def evaluate(env, agent, num_episodes, video_recorder):
        video_recorder.init(enabled=False)  # mbrl-lib saves a video of the best eval
        returns, lengths = [], []
        for _ in range(num_episodes):
            obs, _ = env.reset()
            terminated = truncated = False
            ret, length = 0.0, 0
            while not (terminated or truncated):
                obs, reward, terminated, truncated, _ = env.step(agent.act(obs))  # mean action
                ret += float(reward)
                length += 1
            returns.append(ret)
            lengths.append(length)
        record = {
            "step": counter["steps"],
            "return_mean": float(np.mean(returns)),
            "length_mean": float(np.mean(lengths)),
            "returns": returns,
            "lengths": lengths,
        }
        with open(os.path.join(args.out, "evals.jsonl"), "a") as f:
            f.write(json.dumps(record) + "\n")
        print("eval", json.dumps(record), flush=True)
        return record["return_mean"]

    mbpo.evaluate = evaluate

    env, term_fn, _ = mbrl.util.env.EnvHandler.make_env(cfg)
    test_env, *_ = mbrl.util.env.EnvHandler.make_env(cfg)
    start = time.time()
    mbpo.train(env, test_env, term_fn, cfg, silent=False, work_dir=args.out)
    print(f"done: {counter['steps']} env steps in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
