"""One token from the local test model through llama.cpp: exits non-zero (or dies) when the
installed llama-cpp-python cannot run on this CPU. Used by .ci/run before the suite."""

from simpatterns.llm import ChatRequest, make_client

if __name__ == "__main__":
    with make_client("local:smollm2-135m") as client:
        answer = client.complete_one(ChatRequest([{"role": "user", "content": "Say hi"}], max_tokens=1, seed=0))
    print(f"llama.cpp works: {answer.usage.completion_tokens} token")
