from bench.pipeline import model_tokens, token_quantiles


def test_model_tokens_adds_each_models_tokens_over_stages() -> None:
    costs = {
        "rerank": {"sentence-ranker tokens": 900, "sentence-ranker rows": 24},
        "hop": {"sentence-ranker tokens": 100, "embedder tokens": 40},
        "pages": {"store get_pages calls": 1},
    }
    assert model_tokens(costs) == {"sentence-ranker": 1000, "embedder": 40}


def test_token_quantiles_count_the_claims_before_a_models_first_run_as_none() -> None:
    # The large reader ran on the last 2 of 20 claims: its p50 is 0, its p95 near its most.
    q = token_quantiles([500, 700], 20)
    assert q["p50"] == 0
    assert 500 <= q["p95"] <= 700
