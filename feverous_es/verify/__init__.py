"""The claim pipeline: pages, candidates, evidence, hops, verdict (built with the pipeline issue)."""
