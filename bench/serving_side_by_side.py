"""The product's serving benchmark client beside `vllm bench serve`, on one real vLLM server.

    .venv/bin/python bench/serving_side_by_side.py --stream-interval 1
    .venv/bin/python bench/serving_side_by_side.py --stream-interval 4 --json si4.json

Builds the real-engine tier's tiny Llama (tests/real_engine/tiny_model.py, random weights, a
tokenizer trained on the spot, nothing downloaded) and starts one `vllm serve` on it from the
pinned CPU build (tests/real_engine/environment.py; `make real-engine-env` installs it), with
the tier's offline flags and environment plus `--stream-interval N`. Then, per round and per
concurrency level, it runs both clients at the same settings, one after the other, the order
swapped every round so that a drifting machine does not favour one of them:

- the product's client, deployments/host_scripts/serving_bench.py, exactly as a change job runs
  it on a host: the command line from deployments.host_scripts.serving_bench_argv, the script
  fed on stdin to the engine's own Python (`python -I -`), the key in an environment variable;
- `vllm bench serve` from the same venv: the openai backend on /v1/completions, the random
  dataset, --max-concurrency C, --request-rate inf, --ignore-eos, the local model directory as
  its tokenizer, offline, the key in OPENAI_API_KEY, --temperature 0 (the product's client
  sends temperature 0).

Both get the same input and output lengths and the same number of prompts, and a seed that
changes every round (the same for both), so that no round's prompts are in the prefix cache
from the round before. One untimed warm-up run of each comes first (vllm bench serve also
sends one untimed test request before each run, which leaves that prompt cached).

It prints, per level, the median over the rounds of output tok/s, TTFT p50/p99, ITL p50/p99 per
chunk (vllm bench serve's ITL; the product's `itl_ms`), TPOT p50, with the spread over rounds
and the product/vLLM ratio of the medians, and the product's per-token ITL for reference.
`--json PATH` keeps every round's figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scaffold import loadavg  # first: it puts the checkout on sys.path

from deployments.host_scripts import SERVING_BENCH, serving_bench_argv
from tests.real_engine import environment as real_env
from tests.real_engine import server as real_server

KEY_ENV = "BENCH_VLLM_API_KEY"
# (label, product JSON path, vLLM result key)
METRICS = (
    ("output tok/s", ("output_tok_s",), "output_throughput"),
    ("TTFT p50 ms", ("ttft_ms", "p50"), "median_ttft_ms"),
    ("TTFT p99 ms", ("ttft_ms", "p99"), "p99_ttft_ms"),
    ("ITL p50 ms", ("itl_ms", "p50"), "median_itl_ms"),
    ("ITL p99 ms", ("itl_ms", "p99"), "p99_itl_ms"),
    ("TPOT p50 ms", ("tpot_ms", "p50"), "median_tpot_ms"),
)


def start_server(
    env: real_env.RealEnv, model_dir: Path, runtime: Path, stream_interval: int
) -> real_server.RealServer:
    """The tier's `vllm serve` (server.serve_command, server_environment) with
    --stream-interval; the key comes from VLLM_API_KEY, as a unit should pass it."""
    runtime.mkdir(parents=True, exist_ok=True)
    port = real_server.free_port()
    api_key = "sk-bench-" + secrets.token_urlsafe(24)
    command = real_server.serve_command(env, model_dir, port, api_key)
    at = command.index("--api-key")
    del command[at : at + 2]
    command += ["--stream-interval", str(stream_interval)]
    environ = real_server.server_environment(runtime)
    environ["VLLM_API_KEY"] = api_key
    log_path = runtime / "vllm-serve.log"
    started = time.monotonic()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=environ,
            cwd=runtime,
            start_new_session=True,
        )
    server = real_server.RealServer(
        base_url=f"http://127.0.0.1:{port}",
        api_key=api_key,
        served_name=real_server.SERVED_NAME,
        model_dir=model_dir,
        process=process,
        log_path=log_path,
        command=command,
    )
    try:
        real_server.wait_healthy(server)
    except BaseException:
        server.stop()
        raise
    server.startup_seconds = round(time.monotonic() - started, 1)
    return server


def client_environment(runtime: Path) -> dict[str, str]:
    """Offline, no usage reports, caches under the run's directory (as the server's)."""
    environ = real_server.server_environment(runtime)
    environ.pop("VLLM_CPU_OMP_THREADS_BIND", None)
    return environ


def run_product(
    env: real_env.RealEnv,
    server: real_server.RealServer,
    runtime: Path,
    *,
    concurrency: int,
    num_prompts: int,
    input_tokens: int,
    output_tokens: int,
    seed: int,
) -> dict[str, Any]:
    argv = serving_bench_argv(
        str(env.python),
        port=int(server.base_url.rsplit(":", 1)[1]),
        model=server.served_name,
        concurrency=concurrency,
        num_requests=num_prompts,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        api_key_env=KEY_ENV,
        seed=seed,
        timeout=120.0,
    )
    environ = {**client_environment(runtime), KEY_ENV: server.api_key}
    done = subprocess.run(
        argv,
        input=SERVING_BENCH,
        capture_output=True,
        text=True,
        env=environ,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"serving_bench.py exited {done.returncode}: {done.stderr[-2000:]}")
    result = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    if not result.get("ok") or result.get("errors"):
        raise RuntimeError(f"serving_bench.py failed: {json.dumps(result)[:2000]}")
    return result


def run_vllm(
    env: real_env.RealEnv,
    server: real_server.RealServer,
    runtime: Path,
    *,
    concurrency: int,
    num_prompts: int,
    input_tokens: int,
    output_tokens: int,
    seed: int,
    name: str,
) -> dict[str, Any]:
    results = runtime / "vllm-results"
    results.mkdir(parents=True, exist_ok=True)
    filename = f"{name}.json"
    command = [
        str(env.vllm),
        "bench",
        "serve",
        "--backend",
        "openai",
        "--base-url",
        server.base_url,
        "--endpoint",
        "/v1/completions",
        "--model",
        server.served_name,
        "--tokenizer",
        str(server.model_dir),
        "--dataset-name",
        "random",
        "--random-input-len",
        str(input_tokens),
        "--random-output-len",
        str(output_tokens),
        "--num-prompts",
        str(num_prompts),
        "--max-concurrency",
        str(concurrency),
        "--request-rate",
        "inf",
        "--ignore-eos",
        "--temperature",
        "0",
        "--seed",
        str(seed),
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,99",
        "--disable-tqdm",
        "--save-result",
        "--result-dir",
        str(results),
        "--result-filename",
        filename,
    ]
    environ = {**client_environment(runtime), "OPENAI_API_KEY": server.api_key}
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=environ,
        cwd=runtime,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"vllm bench serve exited {done.returncode}:\n{done.stdout[-2000:]}"
            f"\n{done.stderr[-3000:]}"
        )
    result = dict(json.loads((results / filename).read_text()))
    if result.get("completed") != num_prompts:
        raise RuntimeError(f"vllm bench serve completed {result.get('completed')}/{num_prompts}")
    return result


def product_value(result: dict[str, Any], path: tuple[str, ...]) -> float:
    value: Any = result
    for key in path:
        value = value[key]
    return float(value)


def fmt(value: float) -> str:
    return f"{value:.1f}" if value >= 100 else f"{value:.2f}"


def table(runs: list[dict[str, Any]], levels: list[int]) -> list[str]:
    lines = [
        f"{'C':>3}  {'metric':<14}{'product':>10} {'(min-max)':>15}{'vLLM':>10} "
        f"{'(min-max)':>15}{'ratio':>7}"
    ]
    for level in levels:
        mine = [r for r in runs if r["concurrency"] == level]
        for label, path, key in METRICS:
            ours = [product_value(r["product"], path) for r in mine]
            theirs = [float(r["vllm"][key]) for r in mine]
            a, b = statistics.median(ours), statistics.median(theirs)
            lines.append(
                f"{level:>3}  {label:<14}{fmt(a):>10} {fmt(min(ours)) + '-' + fmt(max(ours)):>15}"
                f"{fmt(b):>10} {fmt(min(theirs)) + '-' + fmt(max(theirs)):>15}"
                f"{a / b if b else float('nan'):>7.2f}"
            )
        per_token = [product_value(r["product"], ("itl_per_token_ms", "p50")) for r in mine]
        sent = {r["product"]["input_tokens_sent"]["mean"] for r in mine}
        theirs_in = {r["vllm"]["total_input_tokens"] / r["vllm"]["completed"] for r in mine}
        out_ours = {r["product"]["output_tokens"] for r in mine}
        out_theirs = {r["vllm"]["total_output_tokens"] for r in mine}
        lines.append(
            f"{level:>3}  product ITL per token p50 {fmt(statistics.median(per_token))} ms; "
            f"input tokens per request: product {sorted(sent)} "
            f"({mine[0]['product']['input_counted_by']}), vLLM {sorted(theirs_in)}; "
            f"output tokens: product {sorted(out_ours)}, vLLM {sorted(out_theirs)}"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stream-interval", type=int, default=1)
    parser.add_argument("--levels", default="1,4", help="concurrency levels, comma-separated")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--input-tokens", type=int, default=128)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument(
        "--prompts-per-stream",
        type=int,
        default=8,
        help="prompts per level = this x concurrency, the same for both clients",
    )
    parser.add_argument("--env", type=Path, default=None, help="the real-engine venv")
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary dir")
    parser.add_argument("--json", type=Path, default=None, help="write every round's figures")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",") if x.strip()]

    env = real_env.RealEnv(args.env or real_env.default_env_dir())
    if not real_env.is_ready(env):
        print(f"no real-engine venv at {env.path}: run `make real-engine-env`", file=sys.stderr)
        return 1
    work = args.workdir or Path(tempfile.mkdtemp(prefix="serving-side-by-side-"))
    began = time.monotonic()
    load_before = loadavg()
    model_dir = work / "model"
    if not (model_dir / "config.json").exists():
        built = real_server.build_model(env, model_dir)
        print(f"built the tiny model: {built['parameters']} parameters, {built['seconds']} s")
    server = start_server(env, model_dir, work / "server", args.stream_interval)
    print(
        f"vllm serve up in {server.startup_seconds} s (--stream-interval {args.stream_interval}); "
        f"{os.cpu_count()} CPUs, {platform.python_version()}, load average {load_before}"
    )
    runs: list[dict[str, Any]] = []
    try:
        common = {"input_tokens": args.input_tokens, "output_tokens": args.output_tokens}
        # Untimed warm-up of both clients (imports, connections, the engine's first batches).
        warm = {"concurrency": max(levels), "num_prompts": max(levels), "seed": 999, **common}
        run_product(env, server, work, **warm)
        run_vllm(env, server, work, name="warmup", **warm)
        for round_no in range(args.rounds):
            for level in levels:
                settings = {
                    "concurrency": level,
                    "num_prompts": level * args.prompts_per_stream,
                    "seed": round_no + 1,
                    **common,
                }
                order = ("product", "vllm") if round_no % 2 == 0 else ("vllm", "product")
                run: dict[str, Any] = {"round": round_no + 1, "concurrency": level}
                for who in order:
                    if who == "product":
                        run["product"] = run_product(env, server, work, **settings)
                    else:
                        name = f"si{args.stream_interval}-c{level}-r{round_no + 1}"
                        run["vllm"] = run_vllm(env, server, work, name=name, **settings)
                runs.append(run)
                print(
                    f"round {round_no + 1} C={level} ({' then '.join(order)}): output tok/s "
                    f"product {run['product']['output_tok_s']:.1f}, "
                    f"vLLM {run['vllm']['output_throughput']:.1f}; ITL p50 ms "
                    f"{run['product']['itl_ms']['p50']:.2f} / {run['vllm']['median_itl_ms']:.2f}"
                    f"; load {loadavg()}",
                    flush=True,
                )
    finally:
        server.stop()
    elapsed = time.monotonic() - began
    print()
    print(
        f"--stream-interval {args.stream_interval}, {args.input_tokens} in / "
        f"{args.output_tokens} out, {args.prompts_per_stream} prompts per stream, request rate "
        f"inf, {args.rounds} rounds; medians over rounds; ratio = product / vLLM"
    )
    for line in table(runs, levels):
        print(line)
    print(f"load average {load_before} before, {loadavg()} after; {elapsed:.0f} s in all")
    if args.json:
        args.json.write_text(
            json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": runs}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
