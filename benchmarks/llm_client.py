"""Requests/s through `LLMClient` against the local scripted server: the overhead of our layer.

The server runs in a separate process (so it does not share our GIL) and
answers instantly; the model is not in the loop, so these numbers measure
the client stack (openai package + our retries, budget, transcript,
concurrency), not inference. The baseline is the bare ``openai`` client
driven the same way (thread pool / asyncio semaphore) in the same run.

    python benchmarks/llm_client.py [--requests 300] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai

from simpatterns.llm import ChatRequest, make_client
from machine import machine_line

ANSWER = 'AND(EVENT("collision", {"object_a": "green ball", "object_b": "blue bar"}))'
MESSAGES = [
    {"role": "system", "content": "You write reward programs."},
    {"role": "user", "content": "Make the green ball touch the blue bar."},
]


def start_server() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "simpatterns.llm.testing", "--default", ANSWER],
                            stdout=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.kill()
        raise SystemExit(f"scripted server did not start (got {url!r})")
    return proc, url


def timed(fn):
    """(requests/s by wall clock, client-process CPU ms per request)."""
    def wrapper(url: str, n: int, conc: int, *args):
        c0 = time.process_time()
        rate = fn(url, n, conc, *args)
        return rate, (time.process_time() - c0) * 1000 / n
    return wrapper


@timed
def raw_sync(url: str, n: int, conc: int) -> float:
    client = openai.OpenAI(base_url=url, api_key="EMPTY", max_retries=0)

    def one(_: int) -> str:
        r = client.chat.completions.create(model="scripted-model", messages=MESSAGES, max_tokens=256, seed=0)
        return r.choices[0].message.content

    t0 = time.perf_counter()
    if conc == 1:
        for i in range(n):
            one(i)
    else:
        with ThreadPoolExecutor(conc) as pool:
            list(pool.map(one, range(n)))
    dt = time.perf_counter() - t0
    client.close()
    return n / dt


@timed
def raw_async(url: str, n: int, conc: int) -> float:
    async def run() -> float:
        client = openai.AsyncOpenAI(base_url=url, api_key="EMPTY", max_retries=0)
        sem = asyncio.Semaphore(conc)

        async def one() -> str:
            async with sem:
                r = await client.chat.completions.create(model="scripted-model", messages=MESSAGES,
                                                         max_tokens=256, seed=0)
                return r.choices[0].message.content

        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        dt = time.perf_counter() - t0
        await client.close()
        return n / dt

    return asyncio.run(run())


@timed
def ours(url: str, n: int, conc: int, mode: str, transcript: Path | None) -> float:
    requests = [ChatRequest(MESSAGES, max_tokens=256, seed=0) for _ in range(n)]
    with make_client("openai", base_url=url, model="scripted-model", concurrency=conc,
                     transcript=transcript) as client:
        t0 = time.perf_counter()
        if mode == "sync":
            out = client.complete(requests)
        else:
            out = asyncio.run(client.acomplete(requests))
        dt = time.perf_counter() - t0
    assert all(c.text == ANSWER for c in out)
    return n / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 64])
    args = ap.parse_args()
    print(machine_line())
    proc, url = start_server()
    print(f"server {url} (separate process); {args.requests} requests per run, best of {args.repeats}; "
          f"{os.cpu_count()} CPUs")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            print("req/s: wall-clock throughput (noisy on a shared machine); cpu ms: client-process CPU per "
                  "request (the cost of the client stack itself)")
            print(f"{'conc':>4} | {'mode':>5} | {'openai req/s':>12} | {'ours req/s':>10} | {'+transcript':>11} | "
                  f"{'openai cpu ms':>13} | {'ours cpu ms':>11} | {'+transcript':>11} | {'cpu ratio':>9}")
            for conc in args.concurrency:
                for mode in ("sync", "async"):
                    base, mine, logged = [], [], []
                    for rep in range(args.repeats):  # interleaved, so load changes hit all three alike
                        base.append((raw_sync if mode == "sync" else raw_async)(url, args.requests, conc))
                        mine.append(ours(url, args.requests, conc, mode, None))
                        logged.append(ours(url, args.requests, conc, mode, Path(tmp) / f"t{conc}{mode}{rep}.jsonl"))
                    b, m, lg = (max(r for r, _ in x) for x in (base, mine, logged))
                    bc, mc, lc = (min(c for _, c in x) for x in (base, mine, logged))
                    print(f"{conc:>4} | {mode:>5} | {b:>12.0f} | {m:>10.0f} | {lg:>11.0f} | {bc:>13.2f} | "
                          f"{mc:>11.2f} | {lc:>11.2f} | {mc / bc:>9.2f}")
    finally:
        proc.terminate()
        proc.wait(5)


if __name__ == "__main__":
    main()
